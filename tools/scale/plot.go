package main

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// plotPNG draws three log-log panels against the distinct counters: the
// agent's RSS, the flush time, and the bytes per live counter and per warm
// count.
func plotPNG(path string, rs []*result) error {
	xy := func(f func(*result) float64) plotter.XYs {
		pts := make(plotter.XYs, 0, len(rs))
		for _, r := range rs {
			if v := f(r); v > 0 {
				pts = append(pts, plotter.XY{X: float64(r.Counters), Y: v})
			}
		}
		return pts
	}
	type series struct {
		name string
		pts  plotter.XYs
	}
	panel := func(title, ylabel string, ss ...series) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = "distinct counters in one flush interval"
		p.Y.Label.Text = ylabel
		p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
		p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
		p.Add(plotter.NewGrid())
		colors := []color.Color{color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}}
		for i, s := range ss {
			if len(s.pts) == 0 {
				continue
			}
			l, pts, err := plotter.NewLinePoints(s.pts)
			if err != nil {
				return nil, err
			}
			l.Color, pts.Color = colors[i%len(colors)], colors[i%len(colors)]
			p.Add(l, pts)
			if len(ss) > 1 {
				p.Legend.Add(s.name, l, pts)
			}
		}
		p.Legend.Top, p.Legend.Left = true, true
		return p, nil
	}
	rss, err := panel("agent memory", "MiB",
		series{"RSS after the adds", xy(func(r *result) float64 { return r.RSSLiveMiB })},
		series{"peak RSS (flush)", xy(func(r *result) float64 { return r.PeakRSSMiB })})
	if err != nil {
		return err
	}
	flush, err := panel("one flush of every counter", "ms",
		series{"flush, wall time", xy(func(r *result) float64 { return r.FlushMillis })},
		series{"CPU time of the stop (flush, publish, GC)", xy(func(r *result) float64 { return r.FlushCPUMs })})
	if err != nil {
		return err
	}
	per, err := panel("memory per item", "bytes (Go heap)",
		series{"per live counter", xy(func(r *result) float64 { return r.BytesPerCtr })},
		series{"per warm count", xy(func(r *result) float64 { return r.BytesPerWarm })})
	if err != nil {
		return err
	}
	// Flat within a decade: a linear axis from 0, with room for the legend.
	per.Y.Scale, per.Y.Tick.Marker = plot.LinearScale{}, plot.DefaultTicks{}
	per.Y.Min = 0
	for _, r := range rs {
		per.Y.Max = max(per.Y.Max, 1.3*r.BytesPerWarm, 1.3*r.BytesPerCtr)
	}
	const w, h = 15 * vg.Inch, 4.5 * vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	t := draw.Tiles{Rows: 1, Cols: 3, PadX: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
	canvases := plot.Align([][]*plot.Plot{{rss, flush, per}}, t, dc)
	rss.Draw(canvases[0][0])
	flush.Draw(canvases[0][1])
	per.Draw(canvases[0][2])
	f, err := createFile(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return f.Close()
}
