package dispatch

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/runtime/model"
)

// block is one content block in MCP's wire form, the form non-text media
// results are stored in.
type block struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	Data     string `json:"data,omitempty"`
	MimeType string `json:"mimeType,omitempty"`
}

// imageTypes are the image media types both providers take.
var imageTypes = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true}

// setMedia turns the answer of a media tool (tools.Definition.Media) into
// non-text media: its other fields as one JSON text block, then an image
// block per entry of its "images". An answer without images stays as it
// was.
func (res *Result) setMedia() {
	var obj map[string]json.RawMessage
	if json.Unmarshal(res.Content, &obj) != nil {
		return
	}
	var images []block
	if json.Unmarshal(obj["images"], &images) != nil || len(images) == 0 {
		return
	}
	delete(obj, "images")
	text, err := json.Marshal(obj)
	if err != nil {
		return
	}
	blocks := []block{{Type: "text", Text: string(text)}}
	for _, img := range images {
		blocks = append(blocks, block{Type: "image", Data: img.Data, MimeType: img.MimeType})
	}
	content, err := json.Marshal(blocks)
	if err != nil {
		return
	}
	res.Kind, res.Content = schematype.KindMedia, content
}

// Media reads stored non-text media: the text of its text blocks, and
// its images in a form models take. ok is false for content that is not
// content blocks.
func Media(content []byte) (texts []string, images []model.Image, ok bool) {
	var blocks []block
	if json.Unmarshal(content, &blocks) != nil {
		return nil, nil, false
	}
	for _, b := range blocks {
		switch {
		case b.Type == "text":
			texts = append(texts, b.Text)
		case b.Type == "image" && imageTypes[b.MimeType]:
			data, err := base64.StdEncoding.DecodeString(b.Data)
			if err != nil {
				return nil, nil, false
			}
			images = append(images, model.Image{MediaType: b.MimeType, Data: data})
		}
	}
	return texts, images, true
}

// Images returns the images of a call's result, for the model that takes
// them: none unless the call gave hits of non-text media.
func Images(res Result) []model.Image {
	if res.Outcome != schematype.OutcomeHits || res.Kind != schematype.KindMedia {
		return nil
	}
	_, images, _ := Media(res.Content)
	return images
}

// mediaWords says non-text media in words: its text, then what it holds
// that is not text and the ref it is stored under. The images themselves
// follow in the message for a model that takes them.
func mediaWords(content []byte, ref string) string {
	texts, images, ok := Media(content)
	if !ok || len(texts) == 0 && len(images) == 0 {
		return fmt.Sprintf("[media result of %d bytes, stored as ref %s]", len(content), ref)
	}
	var b strings.Builder
	for _, t := range texts {
		b.WriteString(t)
		b.WriteByte('\n')
	}
	size := 0
	for _, img := range images {
		size += len(img.Data)
	}
	fmt.Fprintf(&b, "[%d image(s), %d bytes, stored as ref %s]", len(images), size, ref)
	return b.String()
}
