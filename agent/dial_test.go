package agent

import (
	"context"

	"github.com/sandlot/sandlot/agent/podtls"
)

// The pod channel's calls by address, for this package's tests, as
// agent/podchannel makes them (which imports this package, so its tests
// cannot use it).

func dialPodTLS(ctx context.Context, addr string) (BoundConn, error) {
	c, err := podtls.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func dialPod(ctx context.Context, addr string, cfg ClientConfig) (*Client, error) {
	c, err := dialPodTLS(ctx, addr)
	if err != nil {
		return nil, err
	}
	return OpenPod(ctx, c, cfg)
}

func enrollAt(ctx context.Context, addr string, poolKey []byte, e Enrollment) error {
	c, err := dialPodTLS(ctx, addr)
	if err != nil {
		return err
	}
	return Enroll(ctx, c, poolKey, e)
}

func enrollSessionAt(ctx context.Context, addr string, poolKey []byte, e Enrollment, cfg ClientConfig) (*Client, error) {
	c, err := dialPodTLS(ctx, addr)
	if err != nil {
		return nil, err
	}
	return EnrollSession(ctx, c, poolKey, e, cfg)
}

func beginEnrollmentAt(ctx context.Context, addr string, poolKey []byte) (*PendingEnrollment, error) {
	c, err := dialPodTLS(ctx, addr)
	if err != nil {
		return nil, err
	}
	return BeginEnrollment(ctx, c, poolKey)
}
