module keywarden

go 1.19
