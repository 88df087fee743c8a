//! A minimal dense f32 tensor: contiguous row-major data with a shape. The first axis is the
//! batch axis wherever a tensor holds a batch of records.

use crate::error::{NnError, Result};

/// A contiguous row-major `f32` tensor.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tensor {
    shape: Vec<usize>,
    data: Vec<f32>,
}

impl Tensor {
    /// A tensor of zeros with the given shape.
    pub fn zeros(shape: &[usize]) -> Self {
        Self {
            shape: shape.to_vec(),
            data: vec![0.0; shape.iter().product()],
        }
    }

    /// A tensor from data and a shape.
    ///
    /// # Errors
    /// [`NnError::Shape`] when `data.len()` is not the product of `shape`.
    pub fn from_vec(shape: &[usize], data: Vec<f32>) -> Result<Self> {
        let n: usize = shape.iter().product();
        if n != data.len() {
            return Err(NnError::Shape(format!(
                "shape {shape:?} needs {n} values, got {}",
                data.len()
            )));
        }
        Ok(Self {
            shape: shape.to_vec(),
            data,
        })
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The values, row-major.
    pub fn data(&self) -> &[f32] {
        &self.data
    }

    /// The values, row-major, mutable.
    pub fn data_mut(&mut self) -> &mut [f32] {
        &mut self.data
    }

    /// Consumes the tensor, returning its values.
    pub fn into_vec(self) -> Vec<f32> {
        self.data
    }

    /// The size of the first (batch) axis; 0 for a scalar.
    pub fn batch(&self) -> usize {
        self.shape.first().copied().unwrap_or(0)
    }

    /// The number of values per record (product of all axes but the first).
    pub fn record_len(&self) -> usize {
        self.shape.iter().skip(1).product()
    }

    /// Record `i` of a batch, as a slice.
    pub fn record(&self, i: usize) -> &[f32] {
        let r = self.record_len();
        &self.data[i * r..(i + 1) * r]
    }

    /// Reshapes in place to `[batch, record...]`, reusing the allocation (values are kept up to
    /// the new length; new values are zero). Used to recycle buffers between steps.
    pub fn reset(&mut self, batch: usize, record: &[usize]) {
        self.shape.clear();
        self.shape.push(batch);
        self.shape.extend_from_slice(record);
        let n = batch * record.iter().product::<usize>();
        self.data.resize(n, 0.0);
    }

    /// Copies shape and values from `other`, reusing this tensor's allocation.
    pub fn copy_from(&mut self, other: &Tensor) {
        self.shape.clear();
        self.shape.extend_from_slice(&other.shape);
        self.data.clear();
        self.data.extend_from_slice(&other.data);
    }

    /// Sets every value to zero.
    pub fn fill_zero(&mut self) {
        self.data.iter_mut().for_each(|v| *v = 0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_vec_checks_length_and_names_shape() {
        let err = Tensor::from_vec(&[2, 3], vec![0.0; 5])
            .unwrap_err()
            .to_string();
        assert!(err.contains("[2, 3]") && err.contains('5'), "{err}");
        let t = Tensor::from_vec(&[2, 3], (0..6).map(|v| v as f32).collect()).unwrap();
        assert_eq!(t.batch(), 2);
        assert_eq!(t.record(1), &[3.0, 4.0, 5.0]);
    }

    #[test]
    fn reset_reuses_and_resizes() {
        let mut t = Tensor::zeros(&[4, 2]);
        t.reset(3, &[5]);
        assert_eq!(t.shape(), &[3, 5]);
        assert_eq!(t.data().len(), 15);
    }
}
