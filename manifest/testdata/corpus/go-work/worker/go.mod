module example.com/shop/worker

go 1.23.0
