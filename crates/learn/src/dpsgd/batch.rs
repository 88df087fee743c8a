//! Gathering records into model-ready batches (normalised on the way), checking that a data
//! set fits a model, and mapping records once through a model's fixed (parameter-free)
//! leading layers, such as a scattering transform, before training.

use dpml_data::Dataset;
use dpml_nn::{LayerSpec, Sequential, Tensor};
use rayon::prelude::*;

use super::error::{Result, data_err};
use super::normalize::InputTransform;

/// Records per forward pass when mapping a data set through the fixed prefix.
const PREFIX_CHUNK: usize = 512;

/// Copies the `n` records `index(0), …, index(n − 1)` of `data`, transformed by `input`, into
/// `x` (shape `[n, record_shape...]`, allocation reused) and their labels into `labels`. The
/// rows are copied in parallel: on one thread this pass was a few percent of an MLP step.
pub(crate) fn gather(
    data: &Dataset,
    n: usize,
    index: impl Fn(usize) -> usize + Sync,
    input: &InputTransform,
    x: &mut Tensor,
    labels: &mut Vec<usize>,
) {
    let d = data.n_features();
    x.reset(n, &data.record_shape);
    x.data_mut()
        .par_chunks_exact_mut(d.max(1))
        .with_min_len(((1 << 14) / d.max(1)).max(1))
        .enumerate()
        .for_each(|(j, row)| input.apply(data.row(index(j)), row));
    labels.clear();
    labels.extend((0..n).map(|j| data.y[index(j)] as usize));
}

/// Checks that `model` takes `data`'s records and has an output for every class (or one
/// regression output).
pub(crate) fn check_fits(model: &Sequential, data: &Dataset) -> Result<()> {
    check_fits_at(model, 0, data)
}

/// As [`check_fits`] for records that enter the model at layer `start` (0: raw records).
pub(crate) fn check_fits_at(model: &Sequential, start: usize, data: &Dataset) -> Result<()> {
    super::config::check_dataset(data)?;
    let want = model.shape_before(start)?;
    if want != data.record_shape.as_slice() {
        let at = if start == 0 {
            String::new()
        } else {
            format!(" at layer {start}")
        };
        return Err(data_err(format!(
            "model {:?} takes records of shape {want:?}{at}, data set {:?} has records of shape {:?}",
            model.spec().name,
            data.name,
            data.record_shape
        )));
    }
    let outputs: usize = model.output_shape().iter().product();
    // One output is a regression head (see `super::objective`): it answers with the label's
    // value, not one score per class.
    if outputs < data.n_classes && outputs != 1 {
        return Err(data_err(format!(
            "model {:?} has {outputs} outputs, data set {:?} has {} classes",
            model.spec().name,
            data.name,
            data.n_classes
        )));
    }
    Ok(())
}

/// How many leading layers of `model` are worth computing once per record before training:
/// its parameter-free prefix ([`Sequential::fixed_prefix_len`]) when that holds a layer that
/// does real work (e.g. a scattering transform), 0 when it only reshapes or is empty.
pub(crate) fn prefix_to_precompute(model: &Sequential) -> usize {
    let p = model.fixed_prefix_len();
    let cheap = |s: &LayerSpec| matches!(s, LayerSpec::Flatten | LayerSpec::Relu | LayerSpec::Tanh);
    if model.layers()[..p].iter().any(|l| !cheap(&l.spec())) {
        p
    } else {
        0
    }
}

/// `data` mapped through the first `end` layers of `model` (records transformed by `input`
/// first), as a data set whose records have the shape layer `end` takes, with the same labels
/// and classes. The layers are parameter-free and fixed, so this uses no privacy budget: each
/// output record depends only on its own input record. `progress(done, total)` is called
/// after every chunk.
///
/// # Errors
/// [`super::DpSgdError::Data`] when the records do not fit the model; engine errors as
/// [`Sequential::forward_prefix`].
pub(crate) fn map_through_prefix(
    model: &mut Sequential,
    end: usize,
    input: &InputTransform,
    data: &Dataset,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Dataset> {
    check_fits(model, data)?;
    let shape = model.shape_before(end)?.to_vec();
    let d: usize = shape.iter().product();
    let mut out = Vec::with_capacity(data.n.saturating_mul(d));
    let (mut x, mut labels) = (Tensor::default(), Vec::new());
    for start in (0..data.n).step_by(PREFIX_CHUNK) {
        let stop = (start + PREFIX_CHUNK).min(data.n);
        gather(
            data,
            stop - start,
            |j| start + j,
            input,
            &mut x,
            &mut labels,
        );
        out.extend_from_slice(model.forward_prefix(&x, end)?.data());
        progress(stop, data.n);
    }
    Ok(Dataset {
        name: data.name.clone(),
        x: out,
        n: data.n,
        record_shape: shape,
        y: data.y.clone(),
        n_classes: data.n_classes,
        feature_names: (0..d).map(|i| format!("prefix_{i}")).collect(),
        class_names: data.class_names.clone(),
        feature_range: None,
    })
}
