// Package closer releases what a process opened when it stops: Close
// closes one part and logs a failure, so that the rest still closes; a
// Stack runs the releases of the parts a start opened in the reverse order
// of their opening, which is both how a failed start undoes exactly what it
// did and how a stop ends.
//
// A Stack is not safe for concurrent use: the goroutine that starts the
// process pushes onto it, and the one that stops it (or the failed start)
// closes it.
package closer
