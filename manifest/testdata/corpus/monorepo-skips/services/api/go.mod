module example.com/skips/api

go 1.21
