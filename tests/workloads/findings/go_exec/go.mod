module example.com/goexec

go 1.21
