module example.com/gostat

go 1.21
