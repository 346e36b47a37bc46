package events

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPublishReachesOnlyTheTurnsSubscribers(t *testing.T) {
	t.Parallel()
	b := NewBus()
	a1, a2, other := b.Subscribe(1), b.Subscribe(1), b.Subscribe(2)
	b.Publish(Event{Kind: Status, TurnID: 1, At: time.Unix(1, 0)})
	require.Equal(t, Status, (<-a1.C).Kind)
	require.Equal(t, Status, (<-a2.C).Kind)
	select {
	case e := <-other.C:
		t.Fatalf("turn 2 got %v", e)
	default:
	}
	a1.Close()
	a1.Close() // twice is fine
	_, open := <-a1.C
	require.False(t, open)
	require.Equal(t, 1, b.Subscribers(1))
	a2.Close()
	other.Close()
	require.Equal(t, 0, b.Subscribers(1))
}

func TestSlowSubscriberDoesNotBlock(t *testing.T) {
	t.Parallel()
	b := NewBus()
	s := b.Subscribe(7)
	defer s.Close()
	for range Buffer + 10 {
		b.Publish(Event{Kind: ToolCallStarted, TurnID: 7})
	}
	require.EqualValues(t, 10, s.Dropped())
	require.Len(t, s.C, Buffer)
}
