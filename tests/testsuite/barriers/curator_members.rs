//! Real Curator 5.4 members on our barriers: mixed members entering and leaving one double
//! barrier, and a barrier Curator set, removed by ours.
