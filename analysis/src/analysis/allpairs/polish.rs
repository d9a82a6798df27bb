//! Tukey's median polish of log cell times with three additive factors: sender row,
//! receiver column and pair class (Tukey 1977, *Exploratory Data Analysis*, ch. 11).

use commbench_core::stats::{median, sort_samples};

/// Largest number of sweeps.
pub(super) const MAX_SWEEPS: u32 = 50;

/// A sweep that changes no effect by more than this ends the polish.
pub(super) const TOLERANCE: f64 = 1e-9;

/// The fitted effects: `y = m + row[i] + col[j] + class[c] + resid`.
#[derive(Debug, Clone)]
pub(super) struct Polish {
    /// Common value.
    pub m: f64,
    /// Sender effects, per rank (0 for a rank with no cell).
    pub row: Vec<f64>,
    /// Receiver effects, per rank.
    pub col: Vec<f64>,
    /// Class effects, per class index.
    pub class: Vec<f64>,
    /// Residual per cell.
    pub resid: Vec<f64>,
    /// Sweeps done.
    pub sweeps: u32,
}

/// One factor of the model: the level of each cell and the number of levels.
struct Factor<'a> {
    level: &'a [usize],
    levels: usize,
}

/// Median of each level's residuals (0 for a level with no cell) and whether it has cells.
fn level_medians(resid: &[f64], f: &Factor<'_>) -> (Vec<f64>, Vec<bool>) {
    let mut groups: Vec<Vec<f64>> = vec![Vec::new(); f.levels];
    for (r, &l) in resid.iter().zip(f.level) {
        groups[l].push(*r);
    }
    let present: Vec<bool> = groups.iter().map(|g| !g.is_empty()).collect();
    let med = groups
        .into_iter()
        .map(|mut g| {
            sort_samples(&mut g);
            median(&g).unwrap_or(0.0)
        })
        .collect();
    (med, present)
}

/// Sweeps one factor: removes its level medians from the residuals into `effect`, then
/// moves the median of the effects (over levels with cells) into `m`. Returns the largest
/// change made.
fn sweep(resid: &mut [f64], f: &Factor<'_>, effect: &mut [f64], m: &mut f64) -> f64 {
    let (med, present) = level_medians(resid, f);
    for (r, &l) in resid.iter_mut().zip(f.level) {
        *r -= med[l];
    }
    let mut change = 0.0f64;
    for (e, d) in effect.iter_mut().zip(&med) {
        *e += d;
        change = change.max(d.abs());
    }
    let mut live: Vec<f64> = effect
        .iter()
        .zip(&present)
        .filter(|(_, p)| **p)
        .map(|(e, _)| *e)
        .collect();
    sort_samples(&mut live);
    let centre = median(&live).unwrap_or(0.0);
    for (e, p) in effect.iter_mut().zip(&present) {
        if *p {
            *e -= centre;
        }
    }
    *m += centre;
    change.max(centre.abs())
}

/// Median polish of `y` with rows `rows` (n levels), columns `cols` (n levels) and classes
/// `classes` (`nclass` levels): sweeps of row, column and class medians until the largest
/// change is below [`TOLERANCE`] or [`MAX_SWEEPS`] sweeps.
pub(super) fn median_polish(
    y: &[f64],
    rows: &[usize],
    cols: &[usize],
    classes: &[usize],
    n: usize,
    nclass: usize,
) -> Polish {
    let mut sorted = y.to_vec();
    sort_samples(&mut sorted);
    let mut m = median(&sorted).unwrap_or(0.0);
    let mut resid: Vec<f64> = y.iter().map(|v| v - m).collect();
    let mut row = vec![0.0; n];
    let mut col = vec![0.0; n];
    let mut class = vec![0.0; nclass];
    let mut sweeps = 0;
    while sweeps < MAX_SWEEPS {
        sweeps += 1;
        let mut change = sweep(
            &mut resid,
            &Factor {
                level: rows,
                levels: n,
            },
            &mut row,
            &mut m,
        );
        change = change.max(sweep(
            &mut resid,
            &Factor {
                level: cols,
                levels: n,
            },
            &mut col,
            &mut m,
        ));
        let f = Factor {
            level: classes,
            levels: nclass,
        };
        change = change.max(sweep(&mut resid, &f, &mut class, &mut m));
        if change < TOLERANCE {
            break;
        }
    }
    Polish {
        m,
        row,
        col,
        class,
        resid,
        sweeps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_complete_additive_table_is_recovered_exactly() {
        // Senders 0..4, receivers 4..8: every pair present, y = 1 + s_i + r_j + c(class)
        // with the class constant per receiver half.
        let s = [0.0, 0.5, -0.2, 0.1];
        let r = [0.2, 0.0, -0.1, 0.4];
        let c = [0.0, 0.7];
        let (mut y, mut rows, mut cols, mut cls) = (vec![], vec![], vec![], vec![]);
        for (i, si) in s.iter().enumerate() {
            for (j, rj) in r.iter().enumerate() {
                y.push(1.0 + si + rj + c[j / 2]);
                rows.push(i);
                cols.push(4 + j);
                cls.push(j / 2);
            }
        }
        let p = median_polish(&y, &rows, &cols, &cls, 8, 2);
        assert!(p.sweeps < MAX_SWEEPS);
        assert!(p.resid.iter().all(|e| e.abs() < 1e-9), "{:?}", p.resid);
        assert!((p.row[1] - p.row[0] - 0.5).abs() < 1e-9);
        let fitted = p.m + p.row[2] + p.col[7] + p.class[1];
        assert!((fitted - (1.0 - 0.2 + 0.4 + 0.7)).abs() < 1e-9);
    }

    #[test]
    fn the_polish_stops_where_every_median_is_zero() {
        // A table without its diagonal and a class factor that cuts across rows and columns:
        // the polish need not be exact, but at its end hardly any row, column or class median
        // of the residuals is left to sweep, and the fit plus residual is the data.
        let (mut y, mut rows, mut cols, mut cls) = (vec![], vec![], vec![], vec![]);
        for i in 0..7usize {
            for j in (0..7).filter(|&j| j != i) {
                let k = (i ^ j).count_ones() as usize - 1;
                y.push(
                    0.3 * i as f64 - 0.1 * j as f64
                        + 0.5 * k as f64
                        + 0.01 * ((i * 5 + j * 3) % 7) as f64,
                );
                rows.push(i);
                cols.push(j);
                cls.push(k);
            }
        }
        // Here the polish converges geometrically (each sweep cuts the change by about 0.85),
        // so 50 sweeps leave medians of a few 1e-7.
        let p = median_polish(&y, &rows, &cols, &cls, 7, 3);
        assert_eq!(p.sweeps, MAX_SWEEPS);
        for (level, count) in [(&rows, 7), (&cols, 7), (&cls, 3)] {
            let (med, _) = level_medians(
                &p.resid,
                &Factor {
                    level,
                    levels: count,
                },
            );
            assert!(med.iter().all(|m| m.abs() < 1e-5), "{med:?}");
        }
        for (c, e) in p.resid.iter().enumerate() {
            let fitted = p.m + p.row[rows[c]] + p.col[cols[c]] + p.class[cls[c]];
            assert!((fitted + e - y[c]).abs() < 1e-12);
        }
    }

    #[test]
    fn one_outlier_stays_in_its_residual() {
        let (mut y, mut rows, mut cols) = (vec![], vec![], vec![]);
        for i in 0..6 {
            for j in 0..6 {
                if i != j {
                    y.push(if (i, j) == (2, 4) { 3.0 } else { 1.0 });
                    rows.push(i);
                    cols.push(j);
                }
            }
        }
        let cls = vec![0; y.len()];
        let p = median_polish(&y, &rows, &cols, &cls, 6, 1);
        let k = rows
            .iter()
            .zip(&cols)
            .position(|(&i, &j)| (i, j) == (2, 4))
            .unwrap();
        assert!((p.resid[k] - 2.0).abs() < 1e-9);
        assert!(p
            .resid
            .iter()
            .enumerate()
            .all(|(c, e)| c == k || e.abs() < 1e-9));
    }
}
