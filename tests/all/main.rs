//! Every integration test, in one binary so the suite links once. Each module
//! drives the real component through the real host on real redb files.

mod smoke;
