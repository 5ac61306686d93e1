#![doc = include_str!("../README.md")]

pub mod formats;
pub mod policy;
pub mod replay;
pub mod step;
