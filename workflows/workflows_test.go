package workflows_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The workflows import no I/O, not even for its constants (the package comment's rule;
// workflowcheck catches the calls, not the imports).
func TestWorkflowsImportNoIO(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	forbidden := []string{"net/http", "net", "os", "math/rand", "math/rand/v2", "github.com/jackc/pgx", "github.com/lockernet/lockernet/internal/store"}
	checked := 0
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
		require.NoError(t, err)
		checked++
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			require.NoError(t, err)
			assert.False(t, slices.ContainsFunc(forbidden, func(bad string) bool { return path == bad || strings.HasPrefix(path, bad+"/") }),
				"%s imports %s", file, path)
		}
	}
	assert.NotZero(t, checked)
}
