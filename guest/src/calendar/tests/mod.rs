//! Tests of the calendar against outside references: Python's croniter and
//! zoneinfo (fixtures), and brute force over wall minutes (properties).

mod props;
mod reference;
