package idgen_test

import (
	"github.com/idgen/idgen"
	"github.com/idgen/idgen/segment"
)

var _ idgen.Generator = (*segment.Allocator)(nil)
