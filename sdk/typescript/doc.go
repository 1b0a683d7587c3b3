// Package typescript holds paddock's TypeScript SDK, @paddock/sdk: a
// client of the HTTP API typed from httpapi/openapi.json (openapi-typescript
// and openapi-fetch), with the unix socket and TCP transports, typed
// errors, the resumable event streams, streamed and attached exec, a run
// that rejects itself unless submitted, and MCP through the official MCP
// TypeScript SDK. See README.md.
//
// The package has no Go code of its own: its test (typescript_test.go)
// builds the daemon, builds the SDK with npm, runs the SDK's suite (node's
// test runner) against that daemon, and packs it, so that go test ./...
// runs the TypeScript suite too.
package typescript
