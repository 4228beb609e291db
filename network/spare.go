package network

import (
	"context"
	"time"

	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/network/ca"
)

// spare is a network built ahead of need: namespace, veth, addresses,
// routes and CA, with its slot reserved; no rules and no record, so a
// crash leaves only orphans that Start sweeps.
type spare struct {
	slot uint32
	ca   *ca.CA
}

// wantSpare wakes the filler after a spare was taken.
func (m *Manager) wantSpare() {
	select {
	case m.refill <- struct{}{}:
	default:
	}
}

// fill keeps Config.Spares networks built until Close.
func (m *Manager) fill() {
	defer close(m.done)
	for {
		m.mu.Lock()
		need := len(m.spares) < m.cfg.Spares
		m.mu.Unlock()
		if need {
			if err := m.buildSpare(); err != nil {
				m.log.Warn("network: building a spare network failed", logkey.Err, err.Error())
				select {
				case <-m.stop:
					return
				case <-time.After(time.Second):
				}
			}
			continue
		}
		select {
		case <-m.stop:
			return
		case <-m.refill:
		}
	}
}

func (m *Manager) buildSpare() error {
	m.mu.Lock()
	slot, err := m.allocate()
	if err != nil {
		m.mu.Unlock()
		return err
	}
	m.bySlot[slot] = ""
	m.mu.Unlock()
	n := &Net{Path: m.nsPath(slot), Addr: m.addr(slot), Gateway: m.gateway, Iface: m.iface(slot), slot: slot}
	c, err := ca.New("", m.cfg.CAValidity)
	if err == nil {
		err = m.plumb(n)
	}
	if err != nil {
		m.cleanup(slot, "", n.Path)
		m.mu.Lock()
		delete(m.bySlot, slot)
		m.mu.Unlock()
		return err
	}
	m.mu.Lock()
	m.spares = append(m.spares, spare{slot: slot, ca: c})
	m.mu.Unlock()
	return nil
}

// Close stops building spares, removes the spares and releases the host
// lock. The sandboxes' networks stay: they outlive the daemon, and the
// next Start takes them over.
func (m *Manager) Close(ctx context.Context) error {
	m.stopSpares()
	m.unlock()
	return nil
}

// stopSpares stops the spare filler and removes the spares.
func (m *Manager) stopSpares() {
	if m.stop != nil {
		select {
		case <-m.stop:
		default:
			close(m.stop)
		}
		<-m.done
	}
	m.mu.Lock()
	spares := m.spares
	m.spares = nil
	m.mu.Unlock()
	for _, sp := range spares {
		m.cleanup(sp.slot, "", m.nsPath(sp.slot))
		m.mu.Lock()
		delete(m.bySlot, sp.slot)
		m.mu.Unlock()
	}
}

// unlock releases the host lock Start took (lockHost).
func (m *Manager) unlock() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lock != nil {
		m.lock.Close()
		m.lock = nil
	}
}
