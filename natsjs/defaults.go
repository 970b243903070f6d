package natsjs

import "reflect"

// withDefaults returns c with every zero field set to the same field of d:
// what "zero fields take their defaults" means for each configuration
// struct of this package. Fields not exported are left alone.
func withDefaults[T any](c, d T) T {
	cv, dv := reflect.ValueOf(&c).Elem(), reflect.ValueOf(d)
	for i := range cv.NumField() {
		if f := cv.Field(i); f.CanSet() && f.IsZero() {
			f.Set(dv.Field(i))
		}
	}
	return c
}
