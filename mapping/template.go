package mapping

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// DefaultTemplateName names the built-in template and the fallback of
// TemplateSet.Select.
const DefaultTemplateName = "default"

// Template is the phase structure a plan is built from; a task's skill
// selects it (docs/contract.md §3.1). Phases with an empty prompt get the
// dispatch message.
type Template struct {
	Name        string  `yaml:"name"`
	Description string  `yaml:"description,omitempty"`
	Phases      []Phase `yaml:"phases"`
}

// DefaultTemplate is the implement/test/docs plan of examples A and B.
func DefaultTemplate() Template {
	allow := true
	return Template{
		Name:        DefaultTemplateName,
		Description: "Implement the task, test it, document it.",
		Phases: []Phase{
			{
				ID: "implement",
				// Empty: BuildPlan puts the dispatch message here.
				Check: []Check{{Type: CheckGitClean, AllowUntracked: &allow}},
			},
			{
				ID:        "test",
				DependsOn: []string{"implement"},
				Prompt:    "Write tests for the changes made in the implement phase.\nEnsure all tests pass.\n",
				Check:     []Check{{Type: CheckCmdSucceeds, Cmd: "cargo test"}},
			},
			{
				ID:        "docs",
				DependsOn: []string{"implement"},
				Prompt:    "Update the documentation to reflect the changes made in the implement phase.\n",
				Check:     []Check{{Type: CheckFileContains, Path: "README.md", Pattern: "auth"}},
			},
		},
	}
}

// Validate checks what a template must satisfy before plans are built from
// it: a name usable as a skill, and the plan phase rules except that a
// prompt may be empty.
func (t Template) Validate() error {
	if !skillPattern.MatchString(t.Name) {
		return &PlanError{Field: "name", Problem: fmt.Sprintf("template name %q must match %s", t.Name, skillPattern)}
	}
	return validatePhases(t.Phases, false)
}

// ParseTemplate reads an operator's template file. Unlike plan.yaml, unknown
// keys are errors: a misspelt key in a hand-written template would otherwise
// silently vanish from every plan.
func ParseTemplate(data []byte) (Template, error) {
	return parseTemplate(data, "")
}

// parseTemplate is ParseTemplate with a name for a template that does not
// name itself.
func parseTemplate(data []byte, defaultName string) (Template, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var t Template
	if err := dec.Decode(&t); err != nil {
		if errors.Is(err, io.EOF) {
			return Template{}, errors.New("template: empty document")
		}
		return Template{}, fmt.Errorf("template: invalid YAML: %w", err)
	}
	if t.Name == "" {
		t.Name = defaultName
	}
	if err := t.Validate(); err != nil {
		return Template{}, fmt.Errorf("template %q: %w", t.Name, err)
	}
	return t, nil
}

// TemplateSet is the built-in default plus the operator's templates. The
// zero value holds only the built-in default.
type TemplateSet struct {
	byName map[string]Template
	names  []string
}

// NewTemplateSet validates the operator templates and adds them to the
// built-in default; one named "default" replaces the built-in. Two operator
// templates with the same name are an error.
func NewTemplateSet(ts ...Template) (TemplateSet, error) {
	s := TemplateSet{byName: map[string]Template{DefaultTemplateName: DefaultTemplate()}, names: []string{DefaultTemplateName}}
	seen := map[string]bool{}
	for i, t := range ts {
		if err := t.Validate(); err != nil {
			return TemplateSet{}, fmt.Errorf("template %d (%q): %w", i, t.Name, err)
		}
		if seen[t.Name] {
			return TemplateSet{}, fmt.Errorf("template %q defined twice", t.Name)
		}
		seen[t.Name] = true
		if _, exists := s.byName[t.Name]; !exists {
			s.names = append(s.names, t.Name)
		}
		s.byName[t.Name] = t
	}
	slices.Sort(s.names)
	return s, nil
}

// Names lists the template names, sorted.
func (s TemplateSet) Names() []string {
	if s.byName == nil {
		return []string{DefaultTemplateName}
	}
	return slices.Clone(s.names)
}

// Lookup returns the named template.
func (s TemplateSet) Lookup(name string) (Template, bool) {
	if s.byName == nil {
		if name == DefaultTemplateName {
			return DefaultTemplate(), true
		}
		return Template{}, false
	}
	t, ok := s.byName[name]
	return t, ok
}

// Select picks the template for a dispatch: task.skill when set (an unknown
// one is an error, since the operator asked for it by name), else the first
// requiredSkills entry naming a template, else "default".
func (s TemplateSet) Select(d DispatchPlan) (Template, error) {
	if d.Skill != "" {
		t, ok := s.Lookup(d.Skill)
		if !ok {
			return Template{}, &FieldError{Field: "skill", Problem: fmt.Sprintf("no plan template named %q", d.Skill)}
		}
		return t, nil
	}
	for _, sk := range d.RequiredSkills {
		if t, ok := s.Lookup(sk); ok {
			return t, nil
		}
	}
	t, _ := s.Lookup(DefaultTemplateName)
	return t, nil
}

// LoadTemplates reads every *.yaml and *.yml file at the top of fsys as an
// operator plan template (the file name without its extension is the skill
// name unless the file names itself). A nil fsys means the built-in default
// only. It takes a file system rather than a path so that callers choose
// where templates come from (os.DirFS for a folder) and tests need no disk.
func LoadTemplates(fsys fs.FS) (TemplateSet, error) {
	if fsys == nil {
		return NewTemplateSet()
	}
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return TemplateSet{}, fmt.Errorf("read templates: %w", err)
	}
	var ts []Template
	for _, e := range entries { // fs.ReadDir sorts by name
		ext := path.Ext(e.Name())
		if e.IsDir() || (ext != ".yaml" && ext != ".yml") {
			continue
		}
		data, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return TemplateSet{}, fmt.Errorf("read template %s: %w", e.Name(), err)
		}
		t, err := parseTemplate(data, strings.TrimSuffix(e.Name(), ext))
		if err != nil {
			return TemplateSet{}, fmt.Errorf("template file %s: %w", e.Name(), err)
		}
		ts = append(ts, t)
	}
	return NewTemplateSet(ts...)
}
