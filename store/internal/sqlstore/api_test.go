package sqlstore_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/idgen/idgen/store/internal/sqlstore"
	"github.com/idgen/idgen/store/mysql"
	"github.com/idgen/idgen/store/postgres"
	"github.com/idgen/idgen/store/sqlite"
)

// The store packages wrap this one. Their API must offer every method of
// Store and Leases, and name no type of an internal package, which users
// could not write down.
func TestStorePackages_PublicAPI(t *testing.T) {
	shared := map[string]bool{}
	for _, typ := range []reflect.Type{reflect.TypeFor[*sqlstore.Store](), reflect.TypeFor[*sqlstore.Leases]()} {
		for m := range typ.Methods() {
			shared[m.Name] = true
		}
	}
	for _, store := range []reflect.Type{reflect.TypeFor[*sqlite.Store](), reflect.TypeFor[*postgres.Store](), reflect.TypeFor[*mysql.Store]()} {
		t.Run(store.Elem().PkgPath(), func(t *testing.T) {
			leases, ok := store.MethodByName("Leases")
			if !ok {
				t.Fatal("no Leases method")
			}
			offered := map[string]bool{}
			for _, typ := range []reflect.Type{store, leases.Type.Out(0)} {
				for m := range typ.Methods() {
					offered[m.Name] = true
					for _, arg := range append(slicesOf(m.Type.NumIn, m.Type.In), slicesOf(m.Type.NumOut, m.Type.Out)...) {
						if internal(arg) {
							t.Errorf("%v.%s uses %v, of an internal package", typ, m.Name, arg)
						}
					}
				}
			}
			for name := range shared {
				if !offered[name] {
					t.Errorf("%v does not offer %s of the shared SQL store", store, name)
				}
			}
			for f := range store.Elem().Fields() {
				if f.Anonymous {
					t.Errorf("%v embeds %v, whose methods users cannot look up by its name", store, f.Type)
				}
			}
		})
	}
}

func slicesOf(n func() int, at func(int) reflect.Type) []reflect.Type {
	out := make([]reflect.Type, 0, n())
	for i := range n() {
		out = append(out, at(i))
	}
	return out
}

// internal reports whether t, or a type it is built from, is declared in
// an internal package.
func internal(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Chan:
		return internal(t.Elem())
	case reflect.Map:
		return internal(t.Key()) || internal(t.Elem())
	}
	return strings.Contains(t.PkgPath()+"/", "/internal/")
}
