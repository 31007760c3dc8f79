// Package opaque turns a tag's counter into an ID that does not tell how
// many IDs came before it, and back.
//
// A segment counter counts up: two order numbers taken a day apart say
// how many orders came in between. An opaque tag hands out
// Encode(counter) instead, a keyed permutation of the positive int64s
// (FF1 in radix 2 over 63 bits, package ff1, with the tag as the tweak),
// so that:
//
//   - every counter maps to exactly one ID and back: two counters never
//     collide, and the service's uniqueness promise carries over;
//   - IDs are positive int64s, never 0, so they fit the same columns and
//     JSON strings as plain ones;
//   - the same counter maps to unrelated IDs in different tags;
//   - without the key, IDs are in no order a reader can use and say
//     nothing about the counter.
//
// The map is fixed by the key: every instance serving a tag must hold the
// same one, and Key.Fingerprint lets a store record which key a tag was
// created under without recording the key. Opaque IDs are not
// authorization: anyone may guess a valid one. And they do not sort by
// time, so a service that wants B-tree locality keeps its own sequential
// primary key beside them.
package opaque
