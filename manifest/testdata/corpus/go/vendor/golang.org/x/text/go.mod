module golang.org/x/text
