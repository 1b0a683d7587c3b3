package httpapi

import (
	"errors"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/strictjson"
)

// badJSON turns a strictjson refusal into the API's bad_request, naming the key.
func badJSON(err error) error {
	var se *strictjson.Error
	if !errors.As(err, &se) {
		return paddock.Errorf(paddock.CodeBadRequest, "invalid JSON body: %v", err)
	}
	e := paddock.Errorf(paddock.CodeBadRequest, "invalid JSON body: %s", se.Error())
	if se.Key != "" {
		e.WithDetail("key", se.Key)
	}
	return e
}
