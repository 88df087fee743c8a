//! Gathering records into model-ready batches (normalised on the way) and checking that a data
//! set fits a model.

use dpml_data::Dataset;
use dpml_nn::{Sequential, Tensor};

use super::error::{Result, data_err};
use super::normalize::InputTransform;

/// Copies the records at `idx` of `data`, transformed by `input`, into `x` (shape
/// `[idx.len(), record_shape...]`, allocation reused) and their labels into `labels`.
pub(crate) fn gather(
    data: &Dataset,
    idx: impl ExactSizeIterator<Item = usize>,
    input: &InputTransform,
    x: &mut Tensor,
    labels: &mut Vec<usize>,
) {
    let d = data.n_features();
    x.reset(idx.len(), &data.record_shape);
    labels.clear();
    for (row, i) in x.data_mut().chunks_exact_mut(d).zip(idx) {
        input.apply(data.row(i), row);
        labels.push(data.y[i] as usize);
    }
}

/// Checks that `model` takes `data`'s records and has an output for every class.
pub(crate) fn check_fits(model: &Sequential, data: &Dataset) -> Result<()> {
    super::config::check_dataset(data)?;
    if model.input_shape() != data.record_shape.as_slice() {
        return Err(data_err(format!(
            "model {:?} takes records of shape {:?}, data set {:?} has records of shape {:?}",
            model.spec().name,
            model.input_shape(),
            data.name,
            data.record_shape
        )));
    }
    let outputs: usize = model.output_shape().iter().product();
    if outputs < data.n_classes {
        return Err(data_err(format!(
            "model {:?} has {outputs} outputs, data set {:?} has {} classes",
            model.spec().name,
            data.name,
            data.n_classes
        )));
    }
    Ok(())
}
