//! The network f_θ(x, t, e_r): its parameters, storage, the velocity field and the RK4
//! integration, with the dropout masks a trajectory follows.

use crate::rng::Rng;
use crate::rng::RngExt;
use tch::{Kind, Tensor, nn};

use super::{FlowConfig, StoredTensor};
use crate::stats::standard_normal;

/// The network's parameters as tensors.
pub(super) struct Net {
    w1x: Tensor,
    w1t: Tensor,
    b1: Tensor,
    /// [rubrics, E] and [E, H], when there is more than one rubric.
    embedding: Option<(Tensor, Tensor)>,
    w2: Tensor,
    b2: Tensor,
    w3: Tensor,
    b3: Tensor,
}

impl Net {
    /// Fresh parameters in `vs`, initialised as PyTorch's `nn.Linear` and `nn.Embedding` do,
    /// from `rng` rather than libtorch's global generator, so that concurrent trainings in one
    /// process stay reproducible.
    pub(super) fn new(vs: &nn::Path, opts: &FlowConfig, rubrics: usize, rng: &mut Rng) -> Self {
        let h = opts.hidden;
        let e = opts.embedding_dim;
        let pooled = rubrics > 1;
        let fan_in = 2 + if pooled { e } else { 0 };
        let bound = 1.0 / (fan_in as f64).sqrt();
        let bound2 = 1.0 / (h as f64).sqrt();
        let mut var = |name: &str, shape: &[i64], draw: &mut dyn FnMut(&mut Rng) -> f64| {
            let n: i64 = shape.iter().product();
            let values: Vec<f32> = (0..n).map(|_| draw(rng) as f32).collect();
            vs.var_copy(name, &Tensor::from_slice(&values).view(shape))
        };
        let uniform = |b: f64| move |r: &mut Rng| b * (2.0 * r.random::<f64>() - 1.0);
        Net {
            w1x: var("w1x", &[1, h], &mut uniform(bound)),
            w1t: var("w1t", &[1, h], &mut uniform(bound)),
            b1: var("b1", &[h], &mut uniform(bound)),
            embedding: if pooled {
                Some((
                    var("emb", &[rubrics as i64, e], &mut standard_normal),
                    var("w1e", &[e, h], &mut uniform(bound)),
                ))
            } else {
                None
            },
            w2: var("w2", &[h, h], &mut uniform(bound2)),
            b2: var("b2", &[h], &mut uniform(bound2)),
            w3: var("w3", &[h, 1], &mut uniform(bound2)),
            b3: var("b3", &[1], &mut uniform(bound2)),
        }
    }

    pub(super) fn tensors(&self) -> Vec<(&'static str, &Tensor)> {
        let mut out = vec![("w1x", &self.w1x), ("w1t", &self.w1t), ("b1", &self.b1)];
        if let Some((emb, w1e)) = &self.embedding {
            out.push(("emb", emb));
            out.push(("w1e", w1e));
        }
        out.extend([
            ("w2", &self.w2),
            ("b2", &self.b2),
            ("w3", &self.w3),
            ("b3", &self.b3),
        ]);
        out
    }

    pub(super) fn store(&self) -> Vec<(String, StoredTensor)> {
        self.tensors()
            .into_iter()
            .map(|(name, t)| {
                let t = t.detach().to_kind(Kind::Float).contiguous();
                (
                    name.to_owned(),
                    StoredTensor {
                        shape: t.size(),
                        values: Vec::<f32>::try_from(t.view(-1))
                            .unwrap_or_default()
                            .into_iter()
                            .map(f64::from)
                            .collect(),
                    },
                )
            })
            .collect()
    }

    pub(super) fn load(stored: &[(String, StoredTensor)]) -> Result<Self, String> {
        let get = |name: &str| -> Result<Tensor, String> {
            let (_, t) = stored
                .iter()
                .find(|(n, _)| n == name)
                .ok_or_else(|| format!("stored flow lacks tensor {name}"))?;
            let len: i64 = t.shape.iter().product();
            if len as usize != t.values.len() {
                return Err(format!("stored tensor {name} has the wrong size"));
            }
            let values: Vec<f32> = t.values.iter().map(|&v| v as f32).collect();
            Ok(Tensor::from_slice(&values).view(t.shape.as_slice()))
        };
        let embedding = if stored.iter().any(|(n, _)| n == "emb") {
            Some((get("emb")?, get("w1e")?))
        } else {
            None
        };
        Ok(Net {
            w1x: get("w1x")?,
            w1t: get("w1t")?,
            b1: get("b1")?,
            embedding,
            w2: get("w2")?,
            b2: get("b2")?,
            w3: get("w3")?,
            b3: get("b3")?,
        })
    }

    /// The part of the first layer's pre-activation that does not change along a trajectory:
    /// b1 plus the rubric embedding's contribution. `rubric` holds each item's rubric (Int64).
    pub(super) fn base(&self, rubric: &Tensor) -> Tensor {
        match &self.embedding {
            Some((emb, w1e)) => emb.index_select(0, rubric).matmul(w1e) + &self.b1,
            None => self.b1.shallow_clone().unsqueeze(0),
        }
    }

    /// f_θ(x, t) for items with first-layer base `base`, under `masks`.
    ///
    /// Written with fused operations (`addcmul`, `addmm`): at 1,500 items the cost is in the
    /// number of passes over [N, H] tensors, forward and backward.
    pub(super) fn velocity(&self, x: &Tensor, t: f64, base: &Tensor, masks: &Masks) -> Tensor {
        let pre1 = (base + &self.w1t * t).addcmul(x, &self.w1x);
        match masks {
            Masks::PerItem(m1, m2) => {
                let h1 = pre1.tanh() * m1;
                let h2 = self.b2.addmm(&h1, &self.w2).tanh() * m2;
                self.b3.addmm(&h2, &self.w3)
            }
            Masks::Folded(w2, w3) => {
                let h2 = self.b2.addmm(&pre1.tanh(), w2).tanh();
                self.b3.addmm(&h2, w3)
            }
        }
    }

    /// No dropout: the full network, for validation.
    pub(super) fn full(&self) -> Masks {
        Masks::Folded(self.w2.shallow_clone(), self.w3.shallow_clone())
    }

    /// x(1) from x(0) = `x` by fixed-step RK4.
    pub(super) fn integrate(
        &self,
        x: &Tensor,
        steps: usize,
        base: &Tensor,
        masks: &Masks,
    ) -> Tensor {
        let h = 1.0 / steps as f64;
        let mut x = x.shallow_clone();
        for s in 0..steps {
            let t = s as f64 * h;
            let k1 = self.velocity(&x, t, base, masks);
            let k2 = self.velocity(&(&x + &k1 * (h / 2.0)), t + h / 2.0, base, masks);
            let k3 = self.velocity(&(&x + &k2 * (h / 2.0)), t + h / 2.0, base, masks);
            let k4 = self.velocity(&(&x + &k3 * h), t + h, base, masks);
            // Out of place: autograd needs every stage's x.
            x = x.g_add(&((k1 + k2 * 2.0 + k3 * 2.0 + k4) * (h / 6.0)));
        }
        x
    }
}

/// Which sub-networks the items follow.
pub(super) enum Masks {
    /// Row i follows its own masks ([N, H] each): the K MC-dropout passes side by side.
    PerItem(Tensor, Tensor),
    /// Every item follows one network: W2 and W3 given (with any masks folded in).
    Folded(Tensor, Tensor),
}

/// A dropout mask of `h` units, scaled by 1/keep.
pub(super) fn dropout_mask(rng: &mut Rng, h: i64, p: f64) -> Vec<f32> {
    let keep = 1.0 - p;
    (0..h)
        .map(|_| {
            if rng.random::<f64>() >= p {
                (1.0 / keep) as f32
            } else {
                0.0
            }
        })
        .collect()
}
