package pooltop

import (
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

// tick redraws the view every second, so that held-for, expiry and
// waited-for times count without a reading.
const tick = time.Second

type tickMsg struct{}

// model is the bubbletea model of the view.
type model struct {
	st            styles
	screen        screen
	now           func() time.Time // the pool's clock
	width, height int
	quitting      bool
}

func newModel(st styles, name string, interval time.Duration, now func() time.Time) *model {
	return &model{st: st, screen: screen{name: name, interval: interval}, now: now}
}

func tickCmd() tea.Cmd { return tea.Tick(tick, func(time.Time) tea.Msg { return tickMsg{} }) }

func (m *model) Init() tea.Cmd { return tickCmd() }

func (m *model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.KeyMsg:
		switch msg.String() {
		case "q", "Q", "esc", "ctrl+c", "ctrl+d":
			m.quitting = true
			return m, tea.Quit
		}
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case tickMsg:
		return m, tickCmd()
	case readMsg:
		if msg.err != nil {
			m.screen.err, m.screen.errAt = msg.err, msg.at
		} else {
			m.screen.snap, m.screen.err = msg.snap, nil
		}
	}
	return m, nil
}

func (m *model) View() string {
	if m.quitting {
		return "" // nothing left behind on the alternate screen's way out
	}
	if m.width == 0 {
		return "" // the window's size comes first
	}
	return m.screen.render(m.st, m.width, m.height, m.now())
}
