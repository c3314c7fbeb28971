module dejavu.bench/go_http

go 1.21
