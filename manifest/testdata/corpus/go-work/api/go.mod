module example.com/shop/api

go 1.23.0
