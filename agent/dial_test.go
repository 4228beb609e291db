package agent

import (
	"context"

	"github.com/sandlot/sandlot/agent/podtls"
)

// podDial dials the pod channel at addr, as agent/podchannel.Dial does
// (which imports this package, so its tests cannot use it).
func podDial(addr string) PodDial {
	return func(ctx context.Context) (BoundConn, error) {
		c, err := podtls.Dial(ctx, addr)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
}
