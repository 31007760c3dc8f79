package idgencontainer_test

import (
	"context"
	"fmt"
	"log"

	"github.com/testcontainers/testcontainers-go"

	"github.com/idgen/idgen/idgencontainer"
)

// Start idgen in snowflake mode and take an ID. The image is idgen's,
// built with `docker build -t idgen:local .`.
func ExampleRun() {
	ctx := context.Background()
	ctr, err := idgencontainer.Run(ctx, "idgen:local",
		idgencontainer.WithMode("snowflake"),
		idgencontainer.WithAdminToken("change-me-to-a-long-random-token"),
	)
	defer func() {
		if err := testcontainers.TerminateContainer(ctr); err != nil {
			log.Print(err)
		}
	}()
	if err != nil {
		log.Print(err)
		return
	}
	c, err := ctr.Client(ctx)
	if err != nil {
		log.Print(err)
		return
	}
	id, err := c.Next(ctx, "order")
	if err != nil {
		log.Print(err)
		return
	}
	fmt.Println(id > 0)
}
