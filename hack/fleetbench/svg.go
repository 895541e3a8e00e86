/*
Copyright The gpudra Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package main

import (
	"fmt"
	"math"
	"strings"
)

// A small SVG line-chart writer: one figure of side-by-side panels, each
// with one line per series over the same x values (fleet sizes). No
// dependency, deterministic output, readable in a diff and on GitHub.

type point struct{ x, y float64 }

type series struct {
	name   string
	points []point // NaN y: no value (not run, nothing scheduled)
	dashed bool
}

type panel struct {
	title  string
	series []series
}

type figure struct {
	title, xLabel, yLabel string
	logY                  bool
	panels                []panel
}

// palette: one colour per layout, the same in every figure.
var palette = map[string]string{
	layoutGpudra:          "#1b7837",
	layoutWhole:           "#2166ac",
	layoutNVIDIA:          "#b2182b",
	layoutFewProfiles:     "#7fbc41",
	layoutAllSpares:       "#8073ac",
	layoutNodeSpares:      "#a6dba0",
	layoutPartitionPool:   "#00441b",
	layoutEveryCounterSet: "#dfc27d",
}

const (
	panelW, panelH = 300, 220
	marginL        = 58
	marginR        = 12
	marginT        = 46
	marginB        = 44
	legendH        = 26
)

func (f figure) svg() string {
	w := len(f.panels)*(panelW+marginL+marginR) + 10
	h := panelH + marginT + marginB + legendH
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="16" font-size="13" font-weight="bold">%s</text>`+"\n", 8, esc(f.title))
	for i, p := range f.panels {
		x0 := 8 + i*(panelW+marginL+marginR) + marginL
		f.drawPanel(&b, p, x0, marginT)
	}
	// Legend, from the first panel's series.
	if len(f.panels) > 0 {
		lx := 8 + marginL
		ly := marginT + panelH + marginB + 8
		for _, s := range f.panels[0].series {
			if s.dashed {
				continue // the title says what dashed lines are
			}
			fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2.5"%s/>`+"\n", lx, ly, lx+24, ly, colour(s.name), dash(s.dashed))
			fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", lx+30, ly+4, esc(s.name))
			lx += 40 + 7*len(s.name) + 20
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func (f figure) drawPanel(b *strings.Builder, p panel, x0, y0 int) {
	xs, ys := []float64{}, []float64{}
	for _, s := range p.series {
		for _, pt := range s.points {
			xs = append(xs, pt.x)
			if !math.IsNaN(pt.y) && (!f.logY || pt.y > 0) {
				ys = append(ys, pt.y)
			}
		}
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", x0, y0-10, esc(p.title))
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", x0, y0, panelW, panelH)
	if len(xs) == 0 {
		return
	}
	// x: fleet sizes on a log scale (100, 500, 1000), equally readable.
	xmin, xmax := minOf(xs), maxOf(xs)
	xpos := func(x float64) float64 {
		if xmax == xmin {
			return float64(x0) + panelW/2
		}
		return float64(x0) + 16 + (math.Log10(x)-math.Log10(xmin))/(math.Log10(xmax)-math.Log10(xmin))*(panelW-32)
	}
	ticks, ypos := f.yScale(ys, y0)
	for _, t := range ticks {
		y := ypos(t)
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e5e5e5"/>`+"\n", x0, y, x0+panelW, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", x0-4, y+4, tickLabel(t))
	}
	seen := map[float64]bool{}
	for _, x := range xs {
		if seen[x] {
			continue
		}
		seen[x] = true
		px := xpos(x)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", px, y0+panelH+14, tickLabel(x))
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", x0+panelW/2, y0+panelH+30, esc(f.xLabel))
	fmt.Fprintf(b, `<text transform="translate(%d,%d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", x0-44, y0+panelH/2, esc(f.yLabel))
	for _, s := range p.series {
		var path []string
		for _, pt := range s.points {
			if math.IsNaN(pt.y) || (f.logY && pt.y <= 0) {
				continue
			}
			path = append(path, fmt.Sprintf("%.1f,%.1f", xpos(pt.x), ypos(pt.y)))
		}
		if len(path) == 0 {
			continue
		}
		fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(path, " "), colour(s.name), dash(s.dashed))
		for _, c := range path {
			xy := strings.Split(c, ",")
			fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", xy[0], xy[1], colour(s.name))
		}
	}
}

// yScale is the panel's y axis: its ticks, and where a value goes. On a
// log scale the ticks are the powers of ten around the values; otherwise
// five, from 0 to a round number above the largest value.
func (f figure) yScale(ys []float64, y0 int) ([]float64, func(float64) float64) {
	ylo, yhi := 0.0, 1.0
	if len(ys) > 0 {
		ylo, yhi = minOf(ys), maxOf(ys)
	}
	var ticks []float64
	if f.logY && len(ys) > 0 {
		lo, hi := math.Floor(math.Log10(ylo)), math.Ceil(math.Log10(yhi))
		if hi == lo {
			hi++
		}
		for e := lo; e <= hi; e++ {
			ticks = append(ticks, math.Pow(10, e))
		}
		return ticks, func(y float64) float64 {
			return float64(y0+panelH) - (math.Log10(y)-lo)/(hi-lo)*panelH
		}
	}
	top := niceCeil(yhi)
	for i := 0; i <= 4; i++ {
		ticks = append(ticks, top*float64(i)/4)
	}
	return ticks, func(y float64) float64 { return float64(y0+panelH) - y/top*panelH }
}

// colour is the layout's colour; a series is named after its layout,
// perhaps with a suffix such as " p50".
func colour(name string) string {
	layout, _, _ := strings.Cut(name, " ")
	if c, ok := palette[layout]; ok {
		return c
	}
	return "#444"
}

func dash(d bool) string {
	if d {
		return ` stroke-dasharray="5,4"`
	}
	return ""
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func minOf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = math.Min(m, x)
	}
	return m
}

func maxOf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = math.Max(m, x)
	}
	return m
}

// niceCeil rounds up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func tickLabel(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 1000:
		return fmt.Sprintf("%gk", v/1000)
	case v >= 1:
		return fmt.Sprintf("%g", math.Round(v*100)/100)
	default:
		return fmt.Sprintf("%.2g", v)
	}
}
