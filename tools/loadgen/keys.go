package main

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// keys draws content ids, 0..n-1: uniformly, or with P(rank k) ∝ k^-s (id
// k-1 is rank k). The Zipf draw is Hörmann and Derflinger's
// rejection-inversion, which takes O(1) memory and any s > 0, including
// s = 1.0 (math/rand's Zipf needs s > 1). A keys value is immutable; each
// worker passes its own *rand.Rand.
type keys struct {
	n int
	s float64 // 0: uniform

	// rejection-inversion constants
	hx1, hn, sk float64
}

func newKeys(n int, s float64) (*keys, error) {
	if n < 1 || n > maxItems {
		return nil, fmt.Errorf("items %d: want 1..%d", n, maxItems)
	}
	if math.IsNaN(s) || s < 0 || s > 5 {
		return nil, fmt.Errorf("zipf %v: want 0 (uniform) or an exponent in (0, 5]", s)
	}
	k := &keys{n: n, s: s}
	if s > 0 {
		k.hx1 = k.hIntegral(1.5) - 1
		k.hn = k.hIntegral(float64(n) + 0.5)
		k.sk = 2 - k.hIntegralInverse(k.hIntegral(2.5)-k.h(2))
	}
	return k, nil
}

// next returns an id in [0, n).
func (k *keys) next(r *rand.Rand) int {
	if k.s == 0 || k.n == 1 {
		return r.IntN(k.n)
	}
	for {
		u := k.hn + r.Float64()*(k.hx1-k.hn)
		x := k.hIntegralInverse(u)
		rank := int(x + 0.5)
		if rank < 1 {
			rank = 1
		} else if rank > k.n {
			rank = k.n
		}
		if float64(rank)-x <= k.sk || u >= k.hIntegral(float64(rank)+0.5)-k.h(float64(rank)) {
			return rank - 1
		}
	}
}

// h is x^-s; hIntegral is its antiderivative (log x at s = 1, continuous in s).
func (k *keys) h(x float64) float64 { return math.Exp(-k.s * math.Log(x)) }

func (k *keys) hIntegral(x float64) float64 {
	lx := math.Log(x)
	return expm1x((1-k.s)*lx) * lx
}

func (k *keys) hIntegralInverse(x float64) float64 {
	t := x * (1 - k.s)
	if t < -1 {
		t = -1 // numerical guard at the upper end
	}
	return math.Exp(log1px(t) * x)
}

// expm1x is (e^x - 1)/x and log1px is log(1+x)/x, both 1 at x = 0.
func expm1x(x float64) float64 {
	if math.Abs(x) > 1e-8 {
		return math.Expm1(x) / x
	}
	return 1 + x/2*(1+x/3*(1+x/4))
}

func log1px(x float64) float64 {
	if math.Abs(x) > 1e-8 {
		return math.Log1p(x) / x
	}
	return 1 - x*(1.0/2-x*(1.0/3-x/4))
}
