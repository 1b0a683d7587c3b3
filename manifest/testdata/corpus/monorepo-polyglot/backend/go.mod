module example.com/polyglot/backend

go 1.22.1
