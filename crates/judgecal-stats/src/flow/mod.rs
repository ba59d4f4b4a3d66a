//! The neural-ODE score transport on libtorch (tch): `dx/dt = f_θ(x, t, e_r)`, `x(0) = j`,
//! `x(1) = ŷ`, integrated with fixed-step RK4.
//!
//! f_θ has three linear layers (hidden width 64 by default) with tanh and dropout on every
//! hidden layer; its input is x, t and a learned embedding e_r of the rubric, so one flow serves
//! all rubrics of a judge (a judge with one rubric gets no embedding). Scores are standardised
//! with the anchors' judge-score mean and sd before the flow and mapped back after it.
//!
//! Dropout semantics: a dropout mask per hidden layer is held for a whole integration, so a
//! trajectory follows one sub-network. In training each item draws its own each epoch. At
//! inference, MC-dropout runs K sub-networks whose masks come from a seeded
//! generator: pass k uses the same mask in every process, so a stored and reloaded version
//! gives the same numbers. Each sub-network is a fixed one-dimensional map per rubric, which
//! [`Table`] tabulates on a fine grid; corrections interpolate it.

mod corrector;
mod net;
mod report;
mod table;

pub use crate::report::{FlowConfig, ReviewAudit, ReviewRule, Schedule};
pub use corrector::{Flow, FlowModel, FlowOptions, FlowPreset};
pub use report::{FlowReport, FlowTraining, Recipe};
pub use table::Table;

use net::{Masks, Net, dropout_mask};

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::rng::Rng;
use crate::rng::SeedableRng;
use crate::rng::SliceRandom;
use serde::{Deserialize, Serialize};
use tch::nn::OptimizerConfig;
use tch::{Device, Kind, Tensor, nn};

/// libtorch intra-op threads a flow training uses. One: the default recipe's minibatches are
/// too small for a second thread to pay (2.3–2.6 s either way at 1,500 anchors), and a single
/// thread never spins against the HTTP server or a second process for the other core
/// (docs/methods.md, "The flow's training recipe", has the figures).
static THREADS: AtomicUsize = AtomicUsize::new(1);

/// Flow trainings running in this process now. Forward passes (tables, held-out predictions)
/// use every core only while none is: during cross-validation one round predicts while the
/// other trains, and a second thread there only contends with it (`auto` at 6 × 1,000 anchors
/// took 31 s so, 26 s without).
static TRAINING: AtomicUsize = AtomicUsize::new(0);

/// Counts a training while it lives.
struct Training;

impl Training {
    fn start() -> Self {
        TRAINING.fetch_add(1, Ordering::SeqCst);
        Training
    }
}

impl Drop for Training {
    fn drop(&mut self) {
        TRAINING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Sets libtorch's intra-op threads for flow training in this process.
pub fn set_threads(n: usize) {
    THREADS.store(n.max(1), Ordering::Relaxed);
}

/// The intra-op threads a flow training uses.
pub fn threads() -> usize {
    THREADS.load(Ordering::Relaxed)
}

/// Points of each rubric's MC-dropout table.
pub const TABLE_POINTS: usize = 1025;

/// The judge scores a flow version tabulates: the rubric's scale and the anchors' judge
/// scores, widened by half their width on each side.
pub fn table_range(scale: (f64, f64), pairs: &[(f64, f64)]) -> (f64, f64) {
    let lo = pairs.iter().map(|p| p.0).fold(scale.0, f64::min);
    let hi = pairs.iter().map(|p| p.0).fold(scale.1, f64::max);
    let pad = 0.5 * (hi - lo);
    (lo - pad, hi + pad)
}

/// One stored tensor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredTensor {
    pub shape: Vec<i64>,
    /// The f32 values widened to f64, which JSON round-trips exactly (an f32 parsed through
    /// f64 can round twice).
    pub values: Vec<f64>,
}

type Stored = Vec<(String, StoredTensor)>;

/// A trained flow: everything needed to rebuild the network anywhere.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowWeights {
    pub options: FlowConfig,
    pub rubrics: usize,
    /// Standardisation of scores: z = (x − shift) / scale.
    pub shift: f64,
    pub scale: f64,
    pub tensors: Vec<(String, StoredTensor)>,
    /// Epoch whose weights these are; less than `options.epochs` after early stopping.
    pub epochs_run: u64,
    pub stopped_early: bool,
    pub train_loss: f64,
    pub validation_loss: Option<f64>,
}

/// Progress of a training run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Epoch {
    pub epoch: u64,
    /// Epochs the run will make (the last may be partial when `steps` is set).
    pub of: u64,
    pub loss: f64,
}

/// Treats subnormal floats as zero on this thread (and the threads it starts). As training
/// converges, some activations' gradients become subnormal, and x86 arithmetic on them is
/// many times slower: without this an epoch slowed from 33 to 50 ms over 1,500 epochs. The
/// values involved are below 1e-38, far under anything the flow's output can show.
fn flush_denormals() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: MXCSR bits 15 (flush to zero) and 6 (denormals are zero) only change how this
    // thread rounds subnormal results; no memory is touched.
    #[allow(deprecated)]
    unsafe {
        use std::arch::x86_64::{_mm_getcsr, _mm_setcsr};
        _mm_setcsr(_mm_getcsr() | 0x8040);
    }
}

/// The masks of MC-dropout pass `pass`: one [1, h] row per hidden layer, from a seeded
/// generator independent of libtorch, so every process draws the same sub-networks.
pub(crate) fn pass_masks(opts: &FlowConfig, pass: usize) -> (Vec<f32>, Vec<f32>) {
    let mut rng =
        Rng::seed_from_u64(opts.seed ^ 0x4D43_0000 ^ (pass as u64).wrapping_mul(0x9E37_79B9_7F4A));
    let m1 = dropout_mask(&mut rng, opts.hidden, opts.dropout);
    let m2 = dropout_mask(&mut rng, opts.hidden, opts.dropout);
    (m1, m2)
}

/// Trains a flow on `data[r]` = rubric r's (judge, reference) pairs. `progress` is called
/// every 10 epochs; setting `cancel` stops training with an error.
pub fn train(
    data: &[Vec<(f64, f64)>],
    opts: &FlowConfig,
    progress: &dyn Fn(Epoch),
    cancel: &AtomicBool,
) -> Result<FlowWeights, String> {
    opts.check()?;
    let _training = Training::start();
    let rubrics = data.len();
    let split = Split::of(data, opts)?;
    flush_denormals();
    tch::set_num_threads(threads() as i32);
    let vs = nn::VarStore::new(Device::Cpu);
    let mut rng = Rng::seed_from_u64(opts.seed);
    let net = Net::new(&vs.root(), opts, rubrics, &mut rng);
    let adam = nn::Adam::default()
        .build(&vs, opts.learning_rate)
        .map_err(|e| format!("optimizer: {e}"))?;
    let rows = split.train.len();
    let batch = opts.batch_size.map_or(rows, |b| b.clamp(1, rows));
    let per_epoch = rows.div_ceil(batch);
    let total = opts
        .steps
        .map_or(per_epoch * opts.epochs as usize, |s| s as usize);
    let epochs = total.div_ceil(per_epoch) as u64;
    let mut t = Trainer {
        opts,
        train: split.tensors(&split.train),
        validation: split.tensors(&split.validation),
        scale: split.scale,
        net,
        adam,
        rng,
        batch,
        rows,
        total,
        step: 0,
    };
    // Full-batch training checks the validation loss every 10 epochs, minibatch training
    // (many steps an epoch) every epoch.
    let check_every = if batch < rows { 1 } else { 10 };
    let mut order: Vec<i64> = (0..rows as i64).collect();
    // (validation loss, epoch, weights) of the best epoch so far.
    let mut best: Option<(f64, u64, Stored)> = None;
    let mut last_loss = f64::NAN;
    let mut epochs_run = 0;
    let mut stopped_early = false;
    for epoch in 1..=epochs {
        if cancel.load(Ordering::Relaxed) {
            return Err("cancelled".into());
        }
        last_loss = t.epoch(&mut order);
        epochs_run = epoch;
        if !last_loss.is_finite() {
            return Err(format!(
                "training diverged at epoch {epoch} (loss is not finite); lower learning_rate"
            ));
        }
        if epoch % 10 == 0 || epoch == epochs {
            progress(Epoch {
                epoch,
                of: epochs,
                loss: last_loss,
            });
        }
        if split.held > 0 && (epoch % check_every == 0 || epoch == epochs) {
            let val = t.validation_loss();
            match &best {
                Some((b, at, _)) if val >= *b => {
                    if epoch - at >= opts.patience {
                        stopped_early = true;
                        break;
                    }
                }
                _ => best = Some((val, epoch, t.net.store())),
            }
        }
    }
    let (tensors, validation_loss, epochs_run) = match best {
        Some((val, at, stored)) if split.held > 0 => (stored, Some(val), at),
        _ => (t.net.store(), None, epochs_run),
    };
    Ok(FlowWeights {
        options: *opts,
        rubrics,
        shift: split.shift,
        scale: split.scale,
        tensors,
        epochs_run,
        stopped_early,
        train_loss: last_loss,
        validation_loss,
    })
}

/// The anchors standardised over all rubrics and split, seeded, into training and validation
/// rows: (rubric, judge, reference).
struct Split {
    shift: f64,
    scale: f64,
    /// Rows held out for early stopping.
    held: usize,
    train: Vec<(usize, f64, f64)>,
    validation: Vec<(usize, f64, f64)>,
}

impl Split {
    fn of(data: &[Vec<(f64, f64)>], opts: &FlowConfig) -> Result<Self, String> {
        let all: Vec<(usize, f64, f64)> = data
            .iter()
            .enumerate()
            .flat_map(|(r, d)| d.iter().map(move |&(j, y)| (r, j, y)))
            .collect();
        if all.len() < 2 || data.is_empty() {
            return Err("the flow needs at least 2 anchors".into());
        }
        let n = all.len() as f64;
        let shift = crate::stats::mean_of(all.iter().map(|a| a.1));
        let scale = (all.iter().map(|a| (a.1 - shift).powi(2)).sum::<f64>() / n)
            .sqrt()
            .max(1e-3);
        // The validation split, seeded.
        let folds = crate::cv::folds(all.len(), all.len(), opts.seed);
        let held = opts
            .early_stopping
            .map_or(0, |f| ((f * n).ceil() as usize).min(all.len() - 1));
        let (mut train, mut validation) = (Vec::new(), Vec::new());
        for (i, row) in all.iter().enumerate() {
            if folds[i] < held {
                validation.push(*row);
            } else {
                train.push(*row);
            }
        }
        Ok(Self {
            shift,
            scale,
            held,
            train,
            validation,
        })
    }

    /// Standardised judge scores and references ([n, 1] each) and rubric indices.
    fn tensors(&self, rows: &[(usize, f64, f64)]) -> (Tensor, Tensor, Tensor) {
        let standard = |v: f64| ((v - self.shift) / self.scale) as f32;
        let x: Vec<f32> = rows.iter().map(|r| standard(r.1)).collect();
        let y: Vec<f32> = rows.iter().map(|r| standard(r.2)).collect();
        let idx: Vec<i64> = rows.iter().map(|r| r.0 as i64).collect();
        (
            Tensor::from_slice(&x).view([-1, 1]),
            Tensor::from_slice(&y).view([-1, 1]),
            Tensor::from_slice(&idx),
        )
    }
}

/// A flow in training: its net, optimiser and generator, and where the schedule stands.
struct Trainer<'a> {
    opts: &'a FlowConfig,
    train: (Tensor, Tensor, Tensor),
    validation: (Tensor, Tensor, Tensor),
    scale: f64,
    net: Net,
    adam: nn::Optimizer,
    rng: Rng,
    batch: usize,
    rows: usize,
    /// Optimiser steps in all, and taken so far.
    total: usize,
    step: usize,
}

impl Trainer<'_> {
    /// One epoch (minibatches in a fresh order where the batch is smaller than the rows); its
    /// mean training loss in reference units squared.
    fn epoch(&mut self, order: &mut [i64]) -> f64 {
        let (opts, batch, rows) = (self.opts, self.batch, self.rows);
        if batch < rows {
            order.shuffle(&mut self.rng);
        }
        let (x, y, idx) = &self.train;
        let (mut epoch_loss, mut seen) = (0.0, 0);
        for part in order.chunks(batch).take(self.total - self.step) {
            self.adam.set_lr(
                opts.schedule
                    .rate(opts.learning_rate, self.step, self.total),
            );
            self.step += 1;
            let (bx, by, bidx) = if batch < rows {
                let pick = Tensor::from_slice(part);
                (
                    x.index_select(0, &pick),
                    y.index_select(0, &pick),
                    idx.index_select(0, &pick),
                )
            } else {
                (x.shallow_clone(), y.shallow_clone(), idx.shallow_clone())
            };
            // Each item follows its own sub-network for the whole integration, a new one each
            // step, as at inference one per MC pass. (One sub-network shared by the step's
            // items would fold into the weights and save a tenth of the time, but learns the
            // map visibly worse.)
            let rng = &mut self.rng;
            let mut draw = || {
                let m: Vec<f32> = (0..part.len())
                    .flat_map(|_| dropout_mask(rng, opts.hidden, opts.dropout))
                    .collect();
                Tensor::from_slice(&m).view([-1, opts.hidden])
            };
            let masks = Masks::PerItem(draw(), draw());
            let base = self.net.base(&bidx);
            let pred = self.net.integrate(&bx, opts.steps(), &base, &masks);
            let loss = (pred - &by).square().mean(Kind::Float);
            self.adam.backward_step(&loss);
            epoch_loss += loss.double_value(&[]) * part.len() as f64;
            seen += part.len();
        }
        epoch_loss / seen as f64 * self.scale * self.scale
    }

    /// The full network's loss on the validation rows, in reference units squared.
    fn validation_loss(&self) -> f64 {
        let (vx, vy, vidx) = &self.validation;
        tch::no_grad(|| {
            let base = self.net.base(vidx);
            let pred = self
                .net
                .integrate(vx, self.opts.steps(), &base, &self.net.full());
            (pred - vy).square().mean(Kind::Float).double_value(&[]) * self.scale * self.scale
        })
    }
}

impl FlowWeights {
    /// MC-dropout corrections of judge scores `xs` on `rubric`, evaluated directly: per score,
    /// the K sub-networks' outputs. Returns them pass-major: `out[k][i]`.
    pub fn passes(&self, rubric: usize, xs: &[f64]) -> Result<Vec<Vec<f64>>, String> {
        if rubric >= self.rubrics {
            return Err(format!("the flow has no rubric {rubric}"));
        }
        let net = Net::load(&self.tensors)?;
        // Forward passes over many rows: every core pays here (a table of 1,025 points × 40
        // passes: 0.9 s on two threads, 1.5 s on one), unless a training runs beside.
        flush_denormals();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let alone = TRAINING.load(Ordering::SeqCst) == 0;
        tch::set_num_threads(if alone { cores } else { threads() } as i32);
        let opts = &self.options;
        let k = opts.mc_passes;
        let n = xs.len();
        let z: Vec<f32> = xs
            .iter()
            .map(|x| ((x - self.shift) / self.scale) as f32)
            .collect();
        let (mut m1, mut m2) = (Vec::with_capacity(k * n), Vec::with_capacity(k * n));
        for pass in 0..k {
            let (a, b) = pass_masks(opts, pass);
            for _ in 0..n {
                m1.extend_from_slice(&a);
                m2.extend_from_slice(&b);
            }
        }
        let out = tch::no_grad(|| {
            let h = opts.hidden;
            let rows = (k * n) as i64;
            let x = Tensor::from_slice(&z)
                .view([1, -1])
                .repeat([k as i64, 1])
                .view([-1, 1]);
            let idx = Tensor::full([rows], rubric as i64, (Kind::Int64, Device::Cpu));
            let base = net.base(&idx);
            let m1 = Tensor::from_slice(&m1).view([rows, h]);
            let m2 = Tensor::from_slice(&m2).view([rows, h]);
            net.integrate(&x, opts.steps(), &base, &Masks::PerItem(m1, m2))
                .view(-1)
                .to_kind(Kind::Double)
        });
        let flat =
            Vec::<f64>::try_from(out).map_err(|e| format!("reading the flow's output: {e}"))?;
        Ok(flat
            .chunks(n.max(1))
            .map(|c| c.iter().map(|v| v * self.scale + self.shift).collect())
            .collect())
    }

    /// Mean and sd over the MC passes of each score, evaluated directly.
    pub fn correct_direct(&self, rubric: usize, xs: &[f64]) -> Result<Vec<(f64, f64)>, String> {
        let passes = self.passes(rubric, xs)?;
        Ok((0..xs.len())
            .map(|i| mean_sd(passes.iter().map(|p| p[i])))
            .collect())
    }
}

/// Mean and (population) sd of the K pass values.
pub(crate) fn mean_sd(values: impl Iterator<Item = f64> + Clone) -> (f64, f64) {
    let (n, sum) = values
        .clone()
        .fold((0.0, 0.0), |(n, s), v| (n + 1.0, s + v));
    let mean = sum / n;
    let var = values.map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}

#[cfg(test)]
mod tests;
