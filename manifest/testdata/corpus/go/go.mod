module example.com/calc

go 1.22

toolchain go1.22.3

require golang.org/x/text v0.14.0
