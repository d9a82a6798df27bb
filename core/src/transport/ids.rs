//! Who and what a message is addressed by: ranks, tags (user tags below [`TAG_UB`], the
//! control plane above), receive selectors with wildcards, and request handles.

/// A rank: 0..size.
pub type Rank = u32;
/// A message tag. User tags are below [`TAG_UB`].
pub type Tag = u32;

/// User tags are `0..TAG_UB`; tags from `TAG_UB` up belong to the control plane.
pub const TAG_UB: Tag = 1 << 30;
/// Control-plane tag of the barrier.
pub const TAG_BARRIER: Tag = TAG_UB + 1;
/// Control-plane tag of broadcast.
pub const TAG_BCAST: Tag = TAG_UB + 2;
/// Control-plane tag of gather.
pub const TAG_GATHER: Tag = TAG_UB + 3;
/// Control-plane tag of the asymmetric barrier (seed 004).
pub const TAG_ABARRIER: Tag = TAG_UB + 4;

/// Control-plane tag of the closing barrier of the ranks still live, after a run that went on
/// without some ([`crate::transport::control::barrier_among`]).
pub const TAG_CLOSING: Tag = TAG_UB + 20;

/// Control-plane tags of point-to-point messages that carry no measurement and may fly while
/// other ranks measure (all-pairs' steps between rounds): a simulated machine carries them
/// out of band, free, as it runs its collectives, so that they never load a measured pair.
pub const TAG_OUT_OF_BAND: std::ops::Range<Tag> = (TAG_UB + 17)..(TAG_UB + 19);

/// Whether `tag` is one of [`TAG_OUT_OF_BAND`].
#[inline]
pub fn out_of_band(tag: Tag) -> bool {
    TAG_OUT_OF_BAND.contains(&tag)
}

/// The source a receive accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Src {
    /// Any rank (MPI_ANY_SOURCE).
    Any,
    /// This rank only.
    Rank(Rank),
}

impl Src {
    /// Whether a message from `r` is accepted.
    #[inline]
    pub fn accepts(self, r: Rank) -> bool {
        match self {
            Src::Any => true,
            Src::Rank(x) => x == r,
        }
    }
}

/// The tags a receive accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TagSel {
    /// Any user tag (MPI_ANY_TAG); never a control-plane tag.
    Any,
    /// This tag only.
    Tag(Tag),
}

impl TagSel {
    /// Whether a message with tag `t` is accepted.
    #[inline]
    pub fn accepts(self, t: Tag) -> bool {
        match self {
            TagSel::Any => t < TAG_UB,
            TagSel::Tag(x) => x == t,
        }
    }
}

/// The 64-bit tag a tag-matching library (libfabric, UCX) carries for a message from `rank`
/// with tag `tag`: the rank in the upper 32 bits, the tag in the lower 32, so that the library
/// matches source and tag at once.
#[inline(always)]
pub fn tag64(rank: Rank, tag: Tag) -> u64 {
    (rank as u64) << 32 | tag as u64
}

/// The 64-bit tag and the ignore mask (bits set: not compared) a receive selects with in the
/// [`tag64`] encoding: the source bits ignored for any rank, the low 30 bits for any user tag.
/// Control tags, from [`TAG_UB`] = 2^30, have a bit above those set, so a wildcard never
/// matches them.
#[inline(always)]
pub fn select64(src: Src, tag: TagSel) -> (u64, u64) {
    const _: () = assert!(TAG_UB == 1 << 30);
    let (sbits, signore) = match src {
        Src::Any => (0, 0xFFFF_FFFF_0000_0000u64),
        Src::Rank(r) => ((r as u64) << 32, 0),
    };
    let (tbits, tignore) = match tag {
        TagSel::Any => (0, (TAG_UB - 1) as u64),
        TagSel::Tag(t) => (t as u64, 0),
    };
    (sbits | tbits, signore | tignore)
}

/// Handle of a posted operation, valid until its completion has been returned once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReqId(pub u64);
