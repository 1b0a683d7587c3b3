module should.not/appear
