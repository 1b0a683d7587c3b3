package lifecycle

// SetTestHook lets the tests of package lifecycle_test run code at a named
// point of an apply into a working tree ("commit", "verify").
func SetTestHook(m *Manager, f func(point string)) { m.testHook = f }
