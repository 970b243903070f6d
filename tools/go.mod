// Module tools holds edgecount's measuring programs (load generator,
// benchmark report, floor servers, scale and Top-K reports): their plotting
// and benchmark-only dependencies stay out of the service's go.mod. It
// builds against the service in this checkout (the replace below).
module github.com/edgecount/edgecount/tools

go 1.26.8

require (
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/edgecount/edgecount v0.0.0
	go.uber.org/goleak v1.3.0
	gonum.org/v1/plot v0.17.0
	google.golang.org/protobuf v1.36.12
)

require (
	codeberg.org/go-fonts/liberation v0.5.0 // indirect
	codeberg.org/go-latex/latex v0.2.0 // indirect
	codeberg.org/go-pdf/fpdf v0.11.1 // indirect
	git.sr.ht/~sbinet/gg v0.7.0 // indirect
	github.com/ajstarks/svgo v0.0.0-20211024235047-1546f124cd8b // indirect
	github.com/golang/freetype v0.0.0-20170609003504-e2365dfdc4a0 // indirect
	go.etcd.io/bbolt v1.5.0 // indirect
	golang.org/x/image v0.30.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)

replace github.com/edgecount/edgecount => ../
