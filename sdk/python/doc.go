// Package python holds paddock's Python SDK (the paddock package of the
// paddock-sdk distribution, in src/) and, in its test, the one place Go's
// test runner runs that SDK's suite: python_test.go builds the daemon,
// starts nothing itself, and runs pytest on tests/, whose fixtures start
// the daemon on a temporary state directory. There is no Go code to
// import here.
package python
