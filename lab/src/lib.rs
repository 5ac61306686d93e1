#![doc = include_str!("../README.md")]

pub mod replay;
pub mod step;
