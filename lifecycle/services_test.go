package lifecycle

import (
	"reflect"
	"testing"
)

// TestServicesHoldNoManager holds the rule docs/ARCHITECTURE.md draws:
// each service embeds the kernel and holds only the services it calls,
// never the Manager, so that what a service reaches is what its fields
// say.
func TestServicesHoldNoManager(t *testing.T) {
	m := &Manager{kernel: &kernel{}}
	managerType := reflect.TypeOf(m)
	mt := managerType.Elem()
	services := map[reflect.Type]bool{}
	for i := range mt.NumField() {
		if f := mt.Field(i); f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct && f.Name != "kernel" {
			services[f.Type] = true
		}
	}
	if len(services) < 15 {
		t.Fatalf("the Manager holds %d services; the test reads its fields wrong", len(services))
	}
	for st := range services {
		s := st.Elem()
		if f, ok := s.FieldByName("kernel"); !ok || !f.Anonymous || f.Type != reflect.TypeOf(&kernel{}) {
			t.Errorf("%s does not embed *kernel", s.Name())
		}
		for i := range s.NumField() {
			f := s.Field(i)
			switch {
			case f.Type == managerType:
				t.Errorf("%s.%s holds the Manager", s.Name(), f.Name)
			case services[f.Type] && f.Type == st:
				t.Errorf("%s.%s holds its own service", s.Name(), f.Name)
			}
		}
	}
}
