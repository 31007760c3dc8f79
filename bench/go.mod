module github.com/idgen/idgen/bench

go 1.26.8

require (
	github.com/bwmarrin/snowflake v0.3.0
	github.com/edwingeng/slog v0.0.0-20221027170832-482f0dfb6247
	github.com/edwingeng/wuid v1.0.0
	github.com/idgen/idgen v0.0.0
	github.com/oklog/ulid/v2 v2.1.2
	github.com/rs/xid v1.6.0
	github.com/sony/sonyflake/v2 v2.2.0
	github.com/yitter/idgenerator-go v1.3.3
)

require (
	github.com/aclements/go-moremath v0.0.0-20210112150236-f10218a38794 // indirect
	go.uber.org/atomic v1.10.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	go.uber.org/zap v1.23.0 // indirect
	golang.org/x/perf v0.0.0-20260908200009-22c9c6c9d4da // indirect
)

replace github.com/idgen/idgen => ../

tool golang.org/x/perf/cmd/benchstat
