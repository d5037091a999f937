"""Lesson 10's interactive pieces: a translated sentence's cross-attention, and the translate widget.

    weights, src_pieces, out_pieces, text = cross_attention(model, tok, "Ein Hund rennt.")
    translation_widget(model, tok)      # a text box and a layer slider; the maps of every head
"""
import matplotlib.pyplot as plt
import torch

from ..plotting import show_attention
from .decode import translate_ids


@torch.no_grad()
def cross_attention(model, tok, sentence, beam_size=5, length_penalty=0.6):
    """Translate `sentence` and return its decoder cross-attention.

    Returns (weights (num_layers, num_heads, T, S), source pieces (S), output pieces (T), translation):
    row t is the query that produced output piece t (the last row produced <eos>).
    """
    device = next(model.parameters()).device
    src_ids = tok.encode(sentence)
    out_ids = translate_ids(model, [src_ids], device, beam_size=beam_size, length_penalty=length_penalty)[0][0]
    src = torch.tensor([src_ids], device=device)
    tgt_in = torch.tensor([[tok.bos_id] + out_ids], device=device)
    model.eval()
    model.store_attention(True)
    try:
        model(src, tgt_in)
        weights = model.attention_maps()["decoder_cross"][:, 0]         # (L, h, T, S)
    finally:
        model.store_attention(False)
    pieces = [tok.id_to_token(i) for i in out_ids] + ["<eos>"]
    return weights.float().cpu(), [tok.id_to_token(i) for i in src_ids], pieces, tok.decode(out_ids)


def translation_widget(model, tok, sentence="Ein kleiner Junge spielt mit einem roten Ball im Park.",
                       beam_size=5, note=None):
    """A text box for a German sentence and a slider for the decoder layer: shows the translation and
    the cross-attention of every head of that layer, inside the widget, from the first sentence on.

    `note`: a line shown above the translation (e.g. that the model was trained for seconds only).
    """
    import ipywidgets as widgets
    from IPython.display import display

    num_layers = len(model.decoder.layers)
    text = widgets.Text(value=sentence, continuous_update=False, description="German:",
                        layout=widgets.Layout(width="80%"))
    layer = widgets.IntSlider(min=1, max=num_layers, value=num_layers, description="layer",
                              disabled=num_layers == 1)
    out = widgets.Output()

    def show(change=None):
        # The figure is closed and displayed by hand into the Output widget: with plt.show() inside
        # a callback, the first figure went to JupyterLab's log console instead of the widget.
        with out:
            out.clear_output(wait=True)
            if not text.value.strip():
                print("Type a German sentence and press Enter.")
                return
            weights, src_pieces, out_pieces, translation = cross_attention(model, tok, text.value, beam_size)
            if note:
                print(note)
            print("translation:", translation)
            fig = show_attention(weights[layer.value - 1], x_labels=src_pieces, y_labels=out_pieces,
                                 title=f"cross-attention, decoder layer {layer.value} of {num_layers}",
                                 xlabel="German (keys)", ylabel="English (queries)")
            plt.close(fig)
            display(fig)

    text.observe(show, names="value")
    layer.observe(show, names="value")
    box = widgets.VBox([widgets.HBox([text, layer]), out])
    show()
    return box
