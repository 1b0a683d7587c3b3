// Package apiclient is a client of paddock's /v1 API generated from the
// OpenAPI document the daemon serves (httpapi/openapi.json) by oapi-codegen:
// one method per operation, named after its operationId, and the
// document's schemas as Go types.
//
// It exists to hold the document to the server: httpapi's tests
// regenerate it and fail if client.gen.go is stale, and drive a real
// server through it. The CLI and fakeagent use package client, which is
// written by hand on the root package's types.
package apiclient

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -config config.yaml ../openapi.json
