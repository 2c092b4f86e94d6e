//! Tests of the calendar against outside references.
