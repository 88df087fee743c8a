//! From a mechanism's exact probability masses on grid cells to a grid PMF, pessimistically
//! (an upper bound) or optimistically (a lower bound).
//!
//! A mechanism reports, for each loss cell `[jh, (j+1)h]`, the masses `P_j`, `Q_j` that the two
//! neighbouring output distributions give to outcomes whose privacy loss `ln(dP/dQ)` lies in the
//! cell. Merging those outcomes is a post-processing, so the cell is one atom with loss
//! `ln(P_j/Q_j)` inside the cell.
//!
//! * **Pessimistic** ("connect the dots", Doroshenko et al. 2022): split each cell atom into two
//!   atoms at the cell's ends that keep both `P_j` and `Q_j`. The original pair is a
//!   post-processing of the split pair (merge the two atoms back), so the split pair dominates it
//!   and `δ(ε)` can only grow, for every ε, and after any composition. The mass at the top end is
//!   `b = (P_j − e^{jh} Q_j) / (1 − e^{−h})`. Unlike rounding every loss up, this adds no bias of
//!   order h per composition, only of order h².
//! * **Optimistic**: greedy sweeps merge what is left of one cell with just enough of the
//!   adjacent cell that the merged atom's loss is exactly the grid point between them (again a
//!   post-processing, so δ can only shrink); what cannot be balanced is rounded down. The sweeps
//!   run from both ends towards the mode, where the next cell always has more mass, so nearly
//!   everything balances and the bias is of order h², as for the pessimistic side.
//!
//! Truncated tails: pessimistic sends the upper tail to `+∞` and rounds the lower tail up to the
//! grid; optimistic rounds the upper tail down and drops the lower tail.

use super::pmf::Pmf;

/// Exact masses of a mechanism's outcomes, grouped by privacy-loss cell.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Cells {
    /// Grid spacing.
    pub(crate) h: f64,
    /// Cell `i` covers losses `[(j0 + i) h, (j0 + i + 1) h]`.
    pub(crate) j0: i64,
    /// P-mass of each cell (the distribution whose loss is measured).
    pub(crate) p: Vec<f64>,
    /// Q-mass of each cell (the neighbouring distribution).
    pub(crate) q: Vec<f64>,
    /// P-mass of outcomes with Q-mass zero (loss `+∞`).
    pub(crate) inf_p: f64,
    /// Q-mass of outcomes with P-mass zero (loss `−∞`); needed only to swap P and Q.
    pub(crate) neg_inf_q: f64,
    /// (P, Q) masses left out of the cells with losses at least `(j0 + n − 1) h`.
    pub(crate) above: (f64, f64),
    /// (P, Q) masses left out of the cells with losses at most `(j0 + 1) h`.
    pub(crate) below: (f64, f64),
}

impl Cells {
    /// Empty cells covering grid indices `j0 ..= j1` (at least one cell).
    pub(crate) fn new(h: f64, j0: i64, j1: i64) -> Self {
        let n = (j1 - j0 + 1).max(1) as usize;
        Cells {
            h,
            j0,
            p: vec![0.0; n],
            q: vec![0.0; n],
            inf_p: 0.0,
            neg_inf_q: 0.0,
            above: (0.0, 0.0),
            below: (0.0, 0.0),
        }
    }

    /// The cell whose range `[jh, (j+1)h)` holds `loss`, robust to rounding in `loss / h`.
    pub(crate) fn cell_of(h: f64, loss: f64) -> i64 {
        let mut j = (loss / h).floor() as i64;
        if ((j + 1) as f64) * h <= loss {
            j += 1;
        }
        if (j as f64) * h > loss {
            j -= 1;
        }
        j
    }

    /// Adds an atom of masses (p, q) at privacy loss `loss` (which must lie in the covered range).
    pub(crate) fn add_atom(&mut self, loss: f64, p: f64, q: f64) {
        if loss == f64::INFINITY {
            self.inf_p += p;
            return;
        }
        if loss == f64::NEG_INFINITY {
            self.neg_inf_q += q;
            return;
        }
        let last = self.p.len() as i64 - 1;
        let i = (Cells::cell_of(self.h, loss) - self.j0).clamp(0, last) as usize;
        self.p[i] += p;
        self.q[i] += q;
    }

    /// The same masses seen from the other side: P and Q exchanged, losses negated.
    pub(crate) fn swapped(&self) -> Cells {
        let n = self.p.len() as i64;
        Cells {
            h: self.h,
            j0: -(self.j0 + n),
            p: self.q.iter().rev().copied().collect(),
            q: self.p.iter().rev().copied().collect(),
            inf_p: self.neg_inf_q,
            neg_inf_q: self.inf_p,
            above: (self.below.1, self.below.0),
            below: (self.above.1, self.above.0),
        }
    }

    /// Mean and variance of the finite loss under P, each cell at its exact merged loss.
    pub(crate) fn moments(&self) -> (f64, f64) {
        let atoms = || {
            self.p
                .iter()
                .zip(&self.q)
                .enumerate()
                .filter(|(_, (p, _))| **p > 0.0)
                .map(|(i, (p, q))| {
                    let loss = if *q > 0.0 {
                        (p / q).ln()
                    } else {
                        (self.j0 + i as i64 + 1) as f64 * self.h
                    };
                    (loss, *p)
                })
        };
        let mass: f64 = atoms().map(|(_, p)| p).sum();
        if mass <= 0.0 {
            return (0.0, 0.0);
        }
        let mean = atoms().map(|(l, p)| l * p).sum::<f64>() / mass;
        let var = atoms().map(|(l, p)| (l - mean).powi(2) * p).sum::<f64>() / mass;
        (mean, var)
    }

    /// The grid PMF bounding these masses from above (`pessimistic`) or below.
    pub(crate) fn to_pmf(&self, pessimistic: bool) -> Pmf {
        let n = self.p.len();
        let mut out = vec![0.0; n + 1];
        let mut inf = self.inf_p;
        if pessimistic {
            let gap = -(-self.h).exp_m1(); // 1 − e^{−h}
            for (i, (&p, &q)) in self.p.iter().zip(&self.q).enumerate() {
                if p <= 0.0 {
                    continue;
                }
                let bottom = (self.j0 + i as i64) as f64 * self.h;
                let top_mass = ((p - times_exp(q, bottom)) / gap).clamp(0.0, p);
                out[i] += p - top_mass;
                out[i + 1] += top_mass;
            }
            out[1.min(n)] += self.below.0;
            inf += self.above.0;
        } else {
            self.merge_to_grid(&mut out);
            out[n.saturating_sub(1)] += self.above.0;
        }
        let mut pmf = Pmf {
            h: self.h,
            lo: self.j0,
            probs: out,
            inf,
            slack: 0.0,
            pessimistic,
        };
        pmf.truncate();
        pmf
    }

    /// The optimistic construction (see the module documentation), writing P-masses to grid
    /// `out`: a top-down sweep from the highest cell to the mode and a bottom-up sweep from the
    /// lowest cell to just below it, so that on both flanks the remainder carried along meets
    /// cells with more mass and can be balanced exactly. The two final remainders straddle the
    /// mode's bottom grid point and are balanced against each other; what is left is balanced
    /// against a neighbouring grid atom ([`Cells::settle`]).
    fn merge_to_grid(&self, out: &mut [f64]) {
        let mode = (0..self.p.len()).fold(0, |m, i| if self.p[i] > self.p[m] { i } else { m });
        let top = self.merge_down(mode, out);
        let bottom = self.merge_up(mode, out);
        match (top, bottom) {
            (Some(t), Some(b)) if b.cell + 1 == t.cell => {
                let g = self.grid(t.cell);
                let surplus = excess(t.p, t.q, g).max(0.0);
                let deficit = (-excess(b.p, b.q, g)).max(0.0);
                if surplus >= deficit {
                    let f = if surplus > 0.0 {
                        deficit / surplus
                    } else {
                        0.0
                    };
                    out[t.cell] += b.p + f * t.p;
                    self.settle(t.scaled(1.0 - f), out);
                } else {
                    let f = surplus / deficit;
                    out[t.cell] += t.p + f * b.p;
                    self.settle(b.scaled(1.0 - f), out);
                }
            }
            (t, b) => {
                for r in [t, b].into_iter().flatten() {
                    self.settle(r, out);
                }
            }
        }
    }

    /// Loss of grid index `k` of the output (the bottom of cell `k`).
    fn grid(&self, k: usize) -> f64 {
        (self.j0 + k as i64) as f64 * self.h
    }

    /// Places a remainder lying in cell `r.cell` on the grid: merged with part of the grid atom
    /// one below its cell (landing on the cell's bottom) or two above (landing on its top),
    /// whichever needs the smaller part; rounded down when neither has enough mass.
    fn settle(&self, r: Remainder, out: &mut [f64]) {
        if r.p <= 0.0 {
            return;
        }
        let k = r.cell;
        let atom = |j: usize| (out[j], out[j] * (-self.grid(j)).exp());
        // (fraction of the partner needed, partner index, landing index)
        let mut best: Option<(f64, usize, usize)> = None;
        if k >= 1 {
            let (a, aq) = atom(k - 1);
            let (need, have) = (
                excess(r.p, r.q, self.grid(k)).max(0.0),
                -excess(a, aq, self.grid(k)),
            );
            if have > 0.0 && need <= have {
                best = Some((need / have, k - 1, k));
            }
        }
        if k + 2 < out.len() {
            let (a, aq) = atom(k + 2);
            let g = self.grid(k + 1);
            let (need, have) = ((-excess(r.p, r.q, g)).max(0.0), excess(a, aq, g));
            if have > 0.0 && need <= have && best.is_none_or(|b| need / have < b.0) {
                best = Some((need / have, k + 2, k + 1));
            }
        }
        match best {
            Some((f, partner, landing)) => {
                out[landing] += r.p + f * out[partner];
                out[partner] *= 1.0 - f;
            }
            None => out[k] += r.p,
        }
    }

    /// Top-down sweep over cells `from..`; returns the final remainder (in cell `from` when that
    /// cell is not empty). The carry, what is left of the cells above, is balanced against the
    /// cell just below at the grid point between them; when that cell is too light, the carry
    /// is rounded down to the bottom of its own cell; across empty cells likewise.
    fn merge_down(&self, from: usize, out: &mut [f64]) -> Option<Remainder> {
        let mut carry: Option<Remainder> = None;
        for i in (from..self.p.len()).rev() {
            let cell = Remainder {
                p: self.p[i],
                q: self.q[i],
                cell: i,
            };
            if cell.p <= 0.0 {
                continue;
            }
            let Some(c) = carry.filter(|c| c.cell == i + 1) else {
                if let Some(c) = carry {
                    out[c.cell] += c.p;
                }
                carry = Some(cell);
                continue;
            };
            let g = self.grid(i + 1);
            let surplus = excess(c.p, c.q, g).max(0.0);
            let deficit = -excess(cell.p, cell.q, g);
            if deficit <= 0.0 {
                out[i + 1] += c.p + cell.p;
                carry = None;
            } else if deficit >= surplus {
                let t = surplus / deficit;
                out[i + 1] += c.p + t * cell.p;
                carry = Some(cell.scaled(1.0 - t));
            } else {
                out[c.cell] += c.p;
                carry = Some(cell);
            }
        }
        carry
    }

    /// Bottom-up sweep over cells `..to`, the mirror of [`Cells::merge_down`]: the carry (below
    /// the top of its cell) is balanced against the cell just above; returns the final remainder.
    fn merge_up(&self, to: usize, out: &mut [f64]) -> Option<Remainder> {
        let mut carry: Option<Remainder> = None;
        for i in 0..to {
            let cell = Remainder {
                p: self.p[i],
                q: self.q[i],
                cell: i,
            };
            if cell.p <= 0.0 {
                continue;
            }
            let Some(c) = carry.filter(|c| c.cell + 1 == i) else {
                if let Some(c) = carry {
                    out[c.cell] += c.p;
                }
                carry = Some(cell);
                continue;
            };
            let g = self.grid(i);
            let deficit = (-excess(c.p, c.q, g)).max(0.0);
            let surplus = excess(cell.p, cell.q, g);
            if surplus <= 0.0 {
                out[i] += cell.p;
            } else if surplus >= deficit {
                let t = deficit / surplus;
                out[i] += c.p + t * cell.p;
                carry = Some(cell.scaled(1.0 - t));
            } else {
                out[c.cell] += c.p;
                carry = Some(cell);
            }
        }
        carry
    }
}

/// Part of one cell's atom not yet placed on the grid (its loss lies in that cell).
#[derive(Debug, Clone, Copy)]
struct Remainder {
    p: f64,
    q: f64,
    cell: usize,
}

impl Remainder {
    fn scaled(self, f: f64) -> Remainder {
        Remainder {
            p: self.p * f,
            q: self.q * f,
            cell: self.cell,
        }
    }
}

/// `q · e^x` without overflow in the intermediate `e^x`.
fn times_exp(q: f64, x: f64) -> f64 {
    if x < 700.0 {
        q * x.exp()
    } else {
        (q.ln() + x).exp()
    }
}

/// `(p − e^g q)` times the positive factor `min(1, e^{−g})`, computed without overflow.
fn excess(p: f64, q: f64, g: f64) -> f64 {
    if g >= 0.0 {
        p * (-g).exp() - q
    } else {
        p - q * g.exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// δ(ε) of a list of atoms (loss, P-mass), straight from the definition.
    fn delta_atoms(atoms: &[(f64, f64)], eps: f64) -> f64 {
        atoms
            .iter()
            .filter(|(l, _)| *l > eps)
            .map(|(l, p)| p * -(eps - l).exp_m1())
            .sum()
    }

    /// Atoms of a toy mechanism: losses off the grid, P and Q consistent (Q = P e^{−ℓ}).
    fn toy_cells(h: f64) -> (Cells, Vec<(f64, f64)>) {
        let atoms = [
            (-0.33, 0.2),
            (0.07, 0.25),
            (0.12, 0.15),
            (0.41, 0.3),
            (0.93, 0.1),
        ];
        let mut cells = Cells::new(h, Cells::cell_of(h, -0.33), Cells::cell_of(h, 0.93));
        for (l, p) in atoms {
            cells.add_atom(l, p, p * (-l).exp());
        }
        (cells, atoms.to_vec())
    }

    #[test]
    fn pessimistic_and_optimistic_bracket_the_truth() {
        let (cells, atoms) = toy_cells(0.1);
        let upper = cells.to_pmf(true);
        let lower = cells.to_pmf(false);
        for i in -10..=20 {
            let eps = i as f64 * 0.05;
            let truth = delta_atoms(&atoms, eps);
            let (u, l) = (upper.deltas(&[eps])[0], lower.deltas(&[eps])[0]);
            assert!(u >= truth - 1e-15, "eps {eps}: upper {u} < truth {truth}");
            assert!(l <= truth + 1e-15, "eps {eps}: lower {l} > truth {truth}");
        }
        // Connect-the-dots is exact on grid points.
        for i in -3..=9 {
            let eps = i as f64 * 0.1;
            let (u, t) = (upper.deltas(&[eps])[0], delta_atoms(&atoms, eps));
            assert!((u - t).abs() < 1e-14, "eps {eps}: {u} vs {t}");
        }
    }

    #[test]
    fn split_keeps_both_masses() {
        let (cells, atoms) = toy_cells(0.1);
        let upper = cells.to_pmf(true);
        let p_total: f64 = upper.probs.iter().sum();
        let q_total: f64 = upper
            .probs
            .iter()
            .enumerate()
            .map(|(i, p)| p * (-((upper.lo + i as i64) as f64 * 0.1)).exp())
            .sum();
        let q_true: f64 = atoms.iter().map(|(l, p)| p * (-l).exp()).sum();
        assert!((p_total - 1.0).abs() < 1e-14);
        assert!((q_total - q_true).abs() < 1e-14);
    }

    #[test]
    fn swapping_twice_is_the_identity_and_negates_losses() {
        let (cells, _) = toy_cells(0.1);
        assert_eq!(cells.swapped().swapped(), cells);
        let s = cells.swapped();
        // The atom at 0.93 (cell 9) becomes Q-side; its P-mass now sits in cell -10.
        assert_eq!(s.j0, -10);
        assert!((s.q[0] - 0.1).abs() < 1e-15);
    }
}
