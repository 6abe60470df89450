package hub_test

import "github.com/eventhub/eventhub/facade"

func facadeOpts() facade.PublishOptions { return facade.PublishOptions{} }
