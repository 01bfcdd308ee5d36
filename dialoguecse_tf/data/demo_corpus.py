"""The project's own demo corpus: English customer-service dialogues of an online shop.

Everything here is written by this project (templates, slot values, rules); nothing is copied
from another corpus. It exists so every stage (pre-training, contrastive training, SR and D-STS
evaluation) can run end to end on data that may be shipped and regenerated at will.

Dialogues. `generate_dialogues(num_dialogues, seed)` draws from `random.Random(seed)` only, so
a seed always gives the same corpus. Speakers strictly alternate "user" / "agent", starting with
the user, so the paper's speaker merging (section 5.1.1) changes nothing, and every dialogue has
4 to 12 turns. A dialogue is: an optional greeting pair; one episode of a main intent; in about
30% of dialogues a second episode after an intent switch ("Also, ..."), usually to an
intent of the same group (a refund after a return, an invoice after a failed payment); then
optionally a thanks pair and a goodbye pair. An episode is the user's request, and when the
request lacks the detail the agent needs (the order number for `order_status`, the email
address for `password_reset`, ...) the agent asks for it and the user supplies it, then the
agent resolves the request. Slot values (order numbers, products, cities, ...) stay consistent
within a dialogue.

Intent labels, on every utterance:
* the 25 main intents of `INTENT_GROUPS` on user requests and on every agent turn of that
  episode (acknowledgement, question for a detail, resolution), since the agent's turn is about
  the conversation's current intent;
* `greeting`, `thanks` and `goodbye` on the opening and closing pairs, both speakers;
* `inform_<slot type>` (`inform_order_number`, `inform_email`, ...) on a user turn that only
  supplies a requested value ("It's 48213."). Such a turn is not labelled with the main intent:
  its text carries nothing of that intent, so the SR set would otherwise call "It's 48213." a
  paraphrase of "Where is my parcel?".

Evaluation sets (paper section 5.1.2, in the released files' formats). They are built from
separate dialogues (`num_eval_dialogues`, drawn from a stream seeded with
`f"demo-eval-{seed}"`) whose user requests come only from held-out templates: every main
intent has at least 8 training request templates and 6 more that never occur in the training
corpus. Evaluation sentences are therefore unseen wordings, not training text; any exact
coincidence with a training utterance is still removed and counted ("eval_overlap_removed").
As the evaluation stream depends on the seed only, runs with different `num_dialogues` share
the same evaluation sets (barring such removals), which keeps training-size comparisons on one
benchmark.
Only user requests of main intents are evaluation sentences: greetings, thanks, goodbyes and
slot-only informs are generic and would be the same text in training.
* SR (`sr/select.txt`): the distinct evaluation sentences with their intents go through
  `build_sr_set` (BM25 top `num_sr_candidates`, at most `max_sr_positives` positives).
* D-STS (`sts/sts.txt`, `score \\t sentence_a \\t sentence_b`): the score is given by rule
  from intents and slot values, not by annotators (`dsts_score`):
    5  same intent and identical slot values (same slot types filled with the same values; two
       sentences without slots count as identical), i.e. paraphrases;
    4  same intent, different slot values (a slot type only one of them has, or a shared slot
       type with different values);
    3  different intents of the same intent group (`INTENT_GROUPS`: delivery, returns,
       order_problems, payment, account, product_info, shipping_options, rewards);
    2  intents of different groups, but the sentences share at least one slot type (both name
       an order number, a product, a city, ...);
    1  different groups and no shared slot type.
  Pairs are sampled stratified (`num_sts_pairs // 5` per score, the remainder to the lowest
  scores), each candidate pair scored by `dsts_score` and kept only for the score being filled.
  The second sentence of a score-5 pair is rendered from another held-out template of the same
  intent with the first sentence's slot values, since two natural sentences rarely share all
  slot values. `sts/sts_metadata.jsonl` holds each pair's intents, groups and slots, line for
  line. `DSTS_RULE` states the rule as a paragraph for reports.

Nothing here imports TensorFlow.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import string
import time
from collections.abc import Callable, Iterable, Sequence

from dialoguecse_tf.config_io import write_config
from dialoguecse_tf.data.dialogue import Dialogue, Turn
from dialoguecse_tf.data.intent import OOS_LABEL
from dialoguecse_tf.data.readers import write_jsonl
from dialoguecse_tf.data.sr_builder import build_sr_set, write_select_file
from dialoguecse_tf.io_utils import atomic_open, write_json

USER = "user"
AGENT = "agent"
MIN_TURNS = 4
MAX_TURNS = 12
NUM_STS_SCORES = 5

# ---------------------------------------------------------------------------------------------
# Slot values. A template names a placeholder; the placeholder fixes the value pool and the
# slot type its value counts as (a {garment} is a product for the D-STS rule).

_GADGETS = (
    "wireless earbuds", "bluetooth speaker", "smartwatch", "e-reader", "phone charger",
    "laptop stand", "USB-C hub", "action camera", "fitness tracker", "noise-cancelling headphones",
    "tablet", "electric toothbrush",
)
_GARMENTS = (
    "denim jacket", "running shoes", "wool sweater", "rain coat", "linen shirt", "ankle boots",
    "hoodie", "summer dress", "yoga leggings", "winter parka",
)
_OTHER_PRODUCTS = (
    "coffee grinder", "cast iron pan", "desk lamp", "bath towel set", "throw blanket", "kettle",
    "blender", "face serum", "hair dryer", "perfume gift set", "yoga mat", "camping tent",
    "water bottle", "bike helmet", "building blocks set", "jigsaw puzzle", "board game",
    "cookbook", "travel backpack", "office chair",
)
_CITIES = (
    "London", "Manchester", "Leeds", "Bristol", "Glasgow", "Edinburgh", "Cardiff", "Birmingham",
    "Liverpool", "Brighton", "Oxford", "Cambridge", "Belfast", "York", "Norwich", "Newcastle",
)
_COUNTRIES = (
    "France", "Germany", "Ireland", "Spain", "Italy", "the Netherlands", "Canada",
    "the United States", "Australia", "Japan", "Norway", "Poland", "Sweden", "Switzerland",
)
_DATES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday") + tuple(
    f"{month} {day}" for month in ("March", "April", "May", "June", "September", "October", "November")
    for day in (3, 8, 12, 15, 21, 27)
)
_SIZES = ("XS", "S", "M", "L", "XL", "XXL", "8", "10", "12", "14", "40", "42", "44")
_COLOURS = ("black", "white", "navy", "red", "green", "grey", "beige", "olive", "burgundy", "pink",
            "blue", "yellow")
_PAYMENT_METHODS = ("credit card", "debit card", "PayPal", "Apple Pay", "Google Pay", "Klarna",
                    "gift card", "bank transfer")
_COURIERS = ("DPD", "Royal Mail", "Evri", "DHL", "UPS", "FedEx", "Yodel", "Parcelforce")
_COUPON_CODES = ("WELCOME10", "SPRING15", "SUMMER20", "FREESHIP", "SAVE25", "VIP30", "BLACKFRIDAY",
                 "STUDENT10", "HELLO5", "AUTUMN12")
_FIRST_NAMES = ("anna", "ben", "chloe", "david", "emma", "farid", "grace", "harry", "isla", "jack",
                "kiran", "lucy", "mohammed", "nina", "oliver", "priya", "sam", "zoe")
_LAST_NAMES = ("smith", "jones", "patel", "brown", "taylor", "wilson", "khan", "evans", "walsh",
               "murphy", "clarke", "nowak")
_EMAIL_DOMAINS = ("example.com", "mail.example.org", "inbox.example.net")


def _order_number(rng: random.Random) -> str:
    return str(rng.randint(10000, 99999))


def _email(rng: random.Random) -> str:
    return f"{rng.choice(_FIRST_NAMES)}.{rng.choice(_LAST_NAMES)}@{rng.choice(_EMAIL_DOMAINS)}"


def _amount(rng: random.Random) -> str:
    return f"£{rng.randint(4, 250)}.{rng.choice(('00', '49', '95', '99'))}"


def _fee(rng: random.Random) -> str:
    return f"£{rng.randint(1, 14)}.{rng.choice(('49', '95', '99'))}"


def _points(rng: random.Random) -> str:
    return str(rng.randrange(50, 3000, 10))


# placeholder -> (slot type, fixed value pool or a sampler of fresh values)
_PLACEHOLDERS: dict[str, tuple[str, tuple[str, ...] | Callable[[random.Random], str]]] = {
    "order_number": ("order_number", _order_number),
    "product": ("product", _GADGETS + _GARMENTS + _OTHER_PRODUCTS),
    "gadget": ("product", _GADGETS),
    "garment": ("product", _GARMENTS),
    "city": ("city", _CITIES),
    "country": ("country", _COUNTRIES),
    "date": ("date", _DATES),
    "size": ("size", _SIZES),
    "colour": ("colour", _COLOURS),
    "payment_method": ("payment_method", _PAYMENT_METHODS),
    "amount": ("amount", _amount),
    "fee": ("fee", _fee),
    "courier": ("courier", _COURIERS),
    "email": ("email", _email),
    "coupon_code": ("coupon_code", _COUPON_CODES),
    "points": ("points", _points),
}
_POOL_SETS = {name: frozenset(source) for name, (_, source) in _PLACEHOLDERS.items() if isinstance(source, tuple)}

# ---------------------------------------------------------------------------------------------
# Intents.


@dataclasses.dataclass(frozen=True)
class IntentSpec:
    """One main intent: its group, the detail the agent needs and its templates.

    `ask` is the placeholder whose slot type the agent asks for when the request lacks it
    (None: the agent can answer without it). `user` holds the training request templates,
    `held_out` those used only for the evaluation sets. `acknowledge` and `answer` are agent
    templates; an agent turn is an acknowledgement followed by a question or an answer.
    """

    name: str
    group: str
    ask: str | None
    user: tuple[str, ...]
    held_out: tuple[str, ...]
    acknowledge: tuple[str, ...]
    answer: tuple[str, ...]


_INTENT_SPECS = (
    # ----- delivery
    IntentSpec(
        "order_status", "delivery", "order_number",
        user=(
            "Where is my order {order_number}?",
            "Can you tell me the status of order {order_number}?",
            "I ordered the {product} on {date} and haven't heard anything since. Has it shipped?",
            "Has my package left your warehouse yet?",
            "I'd like to track my order, please.",
            "My tracking page hasn't updated in days, what's going on with my parcel?",
            "Could you check where my {product} is right now?",
            "Order {order_number} still says processing. Is that normal?",
            "Any news on my delivery? I placed the order on {date}.",
            "I can't find any tracking information for my purchase.",
        ),
        held_out=(
            "What's the current status of my order?",
            "Can you find out what happened to my order?",
            "Is order {order_number} on its way yet?",
            "I need an update on order {order_number}, please.",
            "Could you look up order {order_number} for me?",
            "My {product} hasn't arrived yet, where is it?",
        ),
        acknowledge=("Let me check that for you.", "Sure, I can look into your order.",
                     "Of course, one moment while I pull up your order."),
        answer=(
            "Order {order_number} left our warehouse on {date} with {courier} and should arrive within two days.",
            "Your parcel is with {courier} and is out for delivery today.",
            "Order {order_number} is packed and will ship on {date}. You'll get a tracking link by email.",
            "It's in transit with {courier}; the latest scan was at their {city} depot.",
        ),
    ),
    IntentSpec(
        "delivery_time", "delivery", "city",
        user=(
            "How long does delivery to {city} usually take?",
            "When will my {product} arrive?",
            "If I order today, will it get here by {date}?",
            "What are your delivery times for {city}?",
            "Roughly how many days does standard shipping take?",
            "I need the {product} before {date}. Is that possible?",
            "Do you deliver on weekends?",
            "What's the expected arrival date for order {order_number}?",
            "Can you give me an estimate of when my parcel will be delivered?",
        ),
        held_out=(
            "How many days until an order reaches {city}?",
            "Could a package sent today be in {city} by the end of the week?",
            "When can I expect my delivery?",
            "How quickly do you usually deliver?",
            "When will order {order_number} be delivered?",
            "How soon could you get the {product} to me?",
        ),
        acknowledge=("Good question.", "Let me check the delivery estimates.",
                     "Sure, I can help with delivery times."),
        answer=(
            "Standard delivery to {city} takes two to three working days.",
            "If you order before 2 pm, it should arrive by {date}.",
            "Express orders to {city} usually arrive the next working day.",
            "We deliver Monday to Saturday; the current estimate is {date}.",
        ),
    ),
    IntentSpec(
        "courier_complaint", "delivery", "order_number",
        user=(
            "The {courier} driver left my parcel outside in the rain.",
            "I want to complain about the courier who delivered order {order_number}.",
            "{courier} says nobody was home, but I was in all day.",
            "Your delivery driver was really rude to me this morning.",
            "The courier threw my box over the fence.",
            "Why do you still use {courier}? They lose half my deliveries.",
            "The delivery guy didn't even ring the bell, he just left a card.",
            "I'd like to file a complaint about {courier}.",
            "The parcel for order {order_number} was left with a neighbour I don't know.",
        ),
        held_out=(
            "I'm unhappy with how {courier} handled my delivery.",
            "Honestly, the service from {courier} was terrible today.",
            "The driver who brought my order was very unprofessional.",
            "I have a complaint about the person who delivered my package.",
            "The {courier} driver refused to bring the parcel upstairs.",
            "I want to report the {courier} driver who handled order {order_number}.",
        ),
        acknowledge=("I'm really sorry about that experience.", "That's not acceptable, and I apologise.",
                     "Thanks for letting us know, I'm sorry this happened."),
        answer=(
            "I've filed a formal complaint with {courier} and added a note to order {order_number}.",
            "I've reported the driver to {courier} and added a £10 voucher to your account for the trouble.",
            "I've escalated this to our delivery partner team; they'll contact {courier} within 48 hours.",
        ),
    ),
    IntentSpec(
        "address_change", "delivery", "order_number",
        user=(
            "I need to change the delivery address for order {order_number}.",
            "Can I send my order to a different address?",
            "I've just moved to {city}, can you update the shipping address?",
            "I typed the wrong street name at checkout, can you fix it?",
            "Please ship order {order_number} to my office in {city} instead.",
            "Is it too late to change where my package goes?",
            "I'd like the {product} delivered to my parents' house instead of mine.",
            "How do I update my address on an order that's already placed?",
            "The postcode on my order is wrong.",
        ),
        held_out=(
            "Could you redirect my parcel to a new address?",
            "I want my order delivered somewhere else.",
            "Can order {order_number} go to {city} rather than the address I gave?",
            "Please change the destination of order {order_number} to {city}.",
            "I gave the wrong address for order {order_number}.",
            "Can the {product} go to {city} instead?",
        ),
        acknowledge=("I can help with that.", "No problem, let's update the address.",
                     "Sure, let me see if the order can still be changed."),
        answer=(
            "Done, order {order_number} will now be delivered to your new address in {city}.",
            "The parcel hasn't shipped yet, so I've updated the address. You'll receive a confirmation email.",
            "It has already left the warehouse, so I've asked {courier} to redirect it to {city}.",
        ),
    ),
    # ----- returns
    IntentSpec(
        "refund", "returns", "order_number",
        user=(
            "I'd like a refund for order {order_number}.",
            "How do I get my money back?",
            "I returned the {product} two weeks ago and still haven't been refunded.",
            "When will the {amount} be credited back to my card?",
            "Can I have a full refund instead of store credit?",
            "You charged me {amount} for something I cancelled, I want that back.",
            "My refund still hasn't shown up on my account.",
            "Please refund me for the {product}, it wasn't what I expected.",
            "What's your refund policy?",
            "Is it possible to get reimbursed for order {order_number}?",
        ),
        held_out=(
            "I want my money back for order {order_number}.",
            "Could you process a refund on order {order_number}?",
            "How long does a refund normally take?",
            "Where is the refund you promised me?",
            "I still haven't got my {amount} back.",
            "I'd like my money back for the {product}.",
        ),
        acknowledge=("I'm sorry for the trouble, let me help with the refund.", "I can look into the refund for you.",
                     "Let me check the refund status."),
        answer=(
            "I've issued a refund of {amount} for order {order_number}; expect it within 3 to 5 business days.",
            "Your refund was approved on {date} and will appear on your statement shortly.",
            "Once we receive the item back, the {amount} refund is processed within 48 hours.",
            "I've refunded the full amount to your original payment method.",
        ),
    ),
    IntentSpec(
        "return_item", "returns", "order_number",
        user=(
            "I want to return the {product} I bought.",
            "How do I send back an item?",
            "Can I return something I bought on sale?",
            "Do I need to pay for the return label?",
            "I'd like to return order {order_number}, it's not for me.",
            "What's the deadline for returns?",
            "The {product} doesn't suit my needs, can I send it back?",
            "Where do I drop off a return?",
            "I've changed my mind about the {product}. Can I return it unopened?",
        ),
        held_out=(
            "Please help me return order {order_number}.",
            "I need a return label for order {order_number}.",
            "What is the process for returning a purchase?",
            "Is it still possible to send my order back?",
            "How do I return the {product}?",
            "I want to send back the {product} from order {order_number}.",
        ),
        acknowledge=("Of course, returns are easy.", "Sure, let me set up a return for you.",
                     "No problem, I can help you send it back."),
        answer=(
            "I've emailed you a free return label for order {order_number}. Drop the parcel at any {courier} point.",
            "You have 30 days from delivery to return unused items. I've started the return for you.",
            "Your return is registered; pack the {product} in its original box and hand it to {courier} by {date}.",
        ),
    ),
    IntentSpec(
        "exchange_size", "returns", "order_number",
        user=(
            "The {garment} is too small, can I swap it for a size {size}?",
            "I need to exchange my {garment} for a bigger size.",
            "Can I get the same {garment} in size {size} instead?",
            "These shoes are half a size too small, can I exchange them?",
            "How do exchanges work if something doesn't fit?",
            "I ordered size {size} but I really need a smaller one.",
            "Could you exchange order {order_number} for a different size?",
            "Is it possible to swap the {garment} for a size {size} in {colour}?",
            "The {colour} {garment} fits badly, I want to change the size.",
        ),
        held_out=(
            "Can I trade my {garment} for a size {size}?",
            "I'd like to exchange the {garment} for size {size}, please.",
            "What do I do if the size I ordered doesn't fit?",
            "I want to exchange something for a different size.",
            "The {garment} is too big, I need size {size}.",
            "Please exchange order {order_number} for a smaller size.",
        ),
        acknowledge=("Sorry it doesn't fit!", "Happy to arrange an exchange.",
                     "No problem, let's get you the right size."),
        answer=(
            "I've reserved a size {size} for you; it ships as soon as {courier} collects the old one.",
            "The exchange for order {order_number} is set up. You'll get a prepaid label by email.",
            "Size {size} is in stock, so I've created an exchange order and it will arrive by {date}.",
        ),
    ),
    IntentSpec(
        "cancel_order", "returns", "order_number",
        user=(
            "Please cancel order {order_number}.",
            "I ordered by mistake, can I cancel it?",
            "How do I cancel an order that hasn't shipped yet?",
            "I no longer need the {product}, please stop the order.",
            "Can you cancel my order before it gets dispatched?",
            "I placed two identical orders, please cancel one of them.",
            "Is there still time to cancel order {order_number}?",
            "I found the {product} cheaper elsewhere, so I want to cancel.",
            "Cancel my purchase from {date}, please.",
        ),
        held_out=(
            "I'd like to cancel my order.",
            "Can my order still be cancelled?",
            "Please call off order {order_number}, I don't want it anymore.",
            "I want to cancel order {order_number} right away.",
            "Stop order {order_number} before it ships, please.",
            "I don't want the {product} anymore, cancel it.",
        ),
        acknowledge=("Let me see if it can still be cancelled.", "Sure, I can help with the cancellation.",
                     "Okay, let me check the order."),
        answer=(
            "Order {order_number} has been cancelled and you'll be refunded {amount} within a few days.",
            "It hadn't been dispatched yet, so the cancellation went through.",
            "It has already shipped, so I can't cancel it, but you can refuse the delivery and we'll refund you.",
        ),
    ),
    # ----- order problems
    IntentSpec(
        "damaged_item", "order_problems", "order_number",
        user=(
            "My {product} arrived broken.",
            "The box was crushed and the {product} inside is cracked.",
            "Order {order_number} came damaged, what can you do?",
            "My {gadget} was smashed when I opened the package.",
            "Half the plates in my order arrived in pieces.",
            "There's a big scratch on the {product} I received.",
            "The item was leaking when it arrived.",
            "What should I do if my order shows up damaged?",
            "The {product} doesn't work, it looks like it was dropped in transit.",
        ),
        held_out=(
            "I received my order and it's damaged.",
            "My parcel arrived with the contents broken.",
            "The {product} from order {order_number} is badly dented.",
            "Order {order_number} arrived with a shattered {product}.",
            "The {product} was broken when I unpacked it.",
            "My {gadget} arrived cracked and won't turn on.",
        ),
        acknowledge=("I'm so sorry it arrived like that.", "That's really disappointing, I apologise.",
                     "Sorry about that, let's sort it out."),
        answer=(
            "I've sent a replacement for order {order_number}; it arrives by {date}. Please keep the damaged one.",
            "Please keep the packaging: {courier} will collect it, and I've issued a full refund of {amount}.",
            "I've arranged a free replacement and filed a damage claim with {courier}.",
        ),
    ),
    IntentSpec(
        "missing_item", "order_problems", "order_number",
        user=(
            "My order arrived but the {product} was missing.",
            "I only got two of the three items I paid for.",
            "The parcel was delivered but something is missing from it.",
            "Order {order_number} is incomplete.",
            "The box came without the charger that should be included.",
            "The tracking says delivered but there was nothing at my door.",
            "Where is the rest of my order?",
            "The {product} I ordered isn't in the package.",
            "One item from order {order_number} never turned up.",
        ),
        held_out=(
            "Part of my order didn't arrive.",
            "Something I paid for wasn't in the box.",
            "Order {order_number} is missing the {product}.",
            "The {product} was not included in order {order_number}.",
            "I can't find the {product} anywhere in the box.",
            "Order {order_number} came with an item missing.",
        ),
        acknowledge=("I'm sorry something was missing.", "Let me look into what went wrong with the packing.",
                     "Sorry about that, I'll check the order contents."),
        answer=(
            "It looks like the {product} was shipped separately and will arrive with {courier} on {date}.",
            "I've sent the missing item from order {order_number} by express delivery.",
            "I've opened an investigation with {courier} and will refund {amount} if it isn't found within 3 days.",
        ),
    ),
    IntentSpec(
        "wrong_item", "order_problems", "order_number",
        user=(
            "I received the wrong item.",
            "I ordered the {garment} in {colour} but you sent a different colour.",
            "You sent me a size {size} instead of the one I ordered.",
            "This isn't what I bought, the package has someone else's order in it.",
            "Order {order_number} contains the wrong product.",
            "Instead of the {product} I got something completely different.",
            "The item in my box doesn't match my order confirmation.",
            "I think my order got mixed up with another customer's.",
            "You delivered the {product}, but I never ordered it.",
        ),
        held_out=(
            "The item I received is not the one I ordered.",
            "You've sent me the wrong thing.",
            "Order {order_number} came with the wrong {product}.",
            "I got a different {product} from what I ordered in order {order_number}.",
            "You sent me the {garment} in {colour}, which isn't what I picked.",
            "This {product} isn't the item I ordered.",
        ),
        acknowledge=("I apologise for the mix-up.", "Sorry, that sounds like a packing error.",
                     "I'm sorry we sent the wrong item."),
        answer=(
            "I've shipped the correct item for order {order_number}; it will arrive by {date}.",
            "Please keep the wrong item; the right {product} is already on its way.",
            "I've emailed a return label for the wrong item and sent the right one with {courier}.",
        ),
    ),
    # ----- payment
    IntentSpec(
        "payment_failed", "payment", "payment_method",
        user=(
            "My payment keeps getting declined.",
            "I tried to pay with {payment_method} but it failed.",
            "Why was my {payment_method} payment rejected?",
            "The checkout page gives me an error when I try to pay.",
            "I was charged but the order didn't go through.",
            "The payment of {amount} failed, but my bank says the money is gone.",
            "Every time I click pay, it says transaction unsuccessful.",
            "My card works everywhere else, why not on your site?",
            "Can you check why my payment didn't work on {date}?",
        ),
        held_out=(
            "I can't complete my payment.",
            "My payment won't go through at checkout.",
            "Paying with {payment_method} doesn't work for me.",
            "Your site keeps refusing my {payment_method}.",
            "My {payment_method} payment of {amount} was declined.",
            "The payment for {amount} keeps failing.",
        ),
        acknowledge=("Sorry about the payment trouble.", "Let me check what happened with the payment.",
                     "That's frustrating, let me take a look."),
        answer=(
            "The bank declined the {payment_method} payment; the {amount} hold is released within a few days.",
            "Our system shows no charge was taken, so please try again or use another payment method.",
            "There was a short outage on {date}; it's fixed now, so the payment should go through.",
        ),
    ),
    IntentSpec(
        "change_payment_method", "payment", "order_number",
        user=(
            "Can I change the payment method on my order?",
            "I'd like to pay with {payment_method} instead.",
            "Is it possible to switch order {order_number} to {payment_method}?",
            "I want to update the card saved on my account.",
            "How do I remove my old card and add a new one?",
            "Can I split the payment between two cards?",
            "I paid by card but would rather use {payment_method}.",
            "Please change how I pay for order {order_number}.",
            "My card expired, how do I add a new one for future orders?",
        ),
        held_out=(
            "I need to use a different payment method.",
            "How can I change the way I pay?",
            "Can order {order_number} be paid with {payment_method} instead?",
            "Please switch the payment on order {order_number} to {payment_method}.",
            "I'd rather pay with {payment_method}, can I change that?",
            "Can I swap the card on order {order_number}?",
        ),
        acknowledge=("Sure, I can help with that.", "No problem, let's update the payment.",
                     "Let me check whether the payment can still be changed."),
        answer=(
            "I've switched order {order_number} to {payment_method}; you'll get a new payment link by email.",
            "You can update saved cards under Account > Payment methods at any time.",
            "The order is already paid, so I'll refund the card once the {payment_method} payment arrives.",
        ),
    ),
    IntentSpec(
        "invoice", "payment", "order_number",
        user=(
            "Can I get an invoice for order {order_number}?",
            "I need a receipt with my company name on it.",
            "Where can I download the invoice for my purchase?",
            "The invoice shows the wrong amount, it should be {amount}.",
            "Please email me a VAT invoice.",
            "I never received a receipt for my order.",
            "Could you resend the invoice for the {product}?",
            "My accountant needs an itemised bill for order {order_number}.",
            "Can you add my tax number to the invoice?",
        ),
        held_out=(
            "I'd like a copy of my invoice.",
            "Where do I find the receipt for my order?",
            "Send me the invoice for order {order_number}, please.",
            "Can you issue a proper invoice for order {order_number}?",
            "I need an invoice for the {product} for my company.",
            "The invoice for order {order_number} never came.",
        ),
        acknowledge=("Of course.", "Sure, I can help with the invoice.", "No problem at all."),
        answer=(
            "I've emailed the invoice for order {order_number} to the address on your account.",
            "You can download all invoices under Account > Orders; I've also resent it just now.",
            "I've corrected the invoice and sent you the updated version showing {amount}.",
        ),
    ),
    # ----- account
    IntentSpec(
        "login_problem", "account", "email",
        user=(
            "I can't log in to my account.",
            "The site says my email {email} isn't registered, but it is.",
            "My account is locked after too many attempts.",
            "I keep getting an error when I try to sign in.",
            "Login doesn't work on the app, only on the website.",
            "It says invalid credentials even though I'm sure they're right.",
            "I'm stuck on the sign-in page, it just keeps loading.",
            "I can't access my account with {email} anymore.",
            "Your two-factor code never arrives, so I can't get in.",
        ),
        held_out=(
            "I'm unable to sign in.",
            "Why can't I get into my account?",
            "Logging in with {email} fails every time.",
            "My account {email} won't let me log in.",
            "Since {date} I haven't been able to log in.",
            "The app keeps rejecting my login for {email}.",
        ),
        acknowledge=("Sorry you're having trouble signing in.", "Let me check your account.",
                     "I can help you get back in."),
        answer=(
            "Your account was locked after several failed attempts; I've unlocked it, so please try again now.",
            "I've sent a one-time login link to {email}.",
            "It looks like the app needs an update; after that, logging in with {email} should work.",
        ),
    ),
    IntentSpec(
        "password_reset", "account", "email",
        user=(
            "I forgot my password.",
            "How do I reset my password?",
            "The password reset email never arrived.",
            "Can you send a reset link to {email}?",
            "The reset link says it has expired.",
            "I want to change my password for security reasons.",
            "I need a new password for the account {email}.",
            "Where's the forgot password option in the app?",
            "My new password isn't accepted, it says it's too weak.",
        ),
        held_out=(
            "Help me reset my password, please.",
            "I can't remember my password.",
            "Please reset the password on {email}.",
            "Could I get a password reset for {email}?",
            "My password for {email} doesn't work anymore, can I set a new one?",
            "Since {date} my old password fails, how do I make a new one?",
        ),
        acknowledge=("No problem, that happens.", "Sure, let's reset it.", "I can help with the password."),
        answer=(
            "I've sent a new reset link to {email}; it's valid for 24 hours.",
            "Tap 'Forgot password' on the sign-in page and follow the link we email you.",
            "Reset emails sometimes land in spam, so please check there; I've sent another one to {email}.",
        ),
    ),
    IntentSpec(
        "unsubscribe_emails", "account", "email",
        user=(
            "Please stop sending me marketing emails.",
            "How do I unsubscribe from your newsletter?",
            "I get three promotional emails a day, make it stop.",
            "Remove {email} from your mailing list.",
            "The unsubscribe link in your email doesn't work.",
            "I unsubscribed last week but I'm still getting offers.",
            "Can I keep order updates but stop the advertising emails?",
            "Take me off your mailing list, please.",
            "I never signed up for your newsletter, why is {email} receiving it?",
        ),
        held_out=(
            "I'd like to unsubscribe from all your emails.",
            "I don't want any more newsletters from you.",
            "Please unsubscribe {email} from your promotions.",
            "Stop emailing {email} with offers.",
            "How do I stop the newsletters going to {email}?",
            "Since {date} you've been flooding my inbox with offers.",
        ),
        acknowledge=("Sorry about the flood of emails.", "Sure, I can update your email preferences.", "Of course."),
        answer=(
            "I've removed {email} from all marketing emails; you'll still get order updates.",
            "Done. It can take up to 48 hours for the last scheduled emails to stop.",
            "You're unsubscribed from the newsletter; you can change this any time under Account > Preferences.",
        ),
    ),
    # ----- product information
    IntentSpec(
        "warranty", "product_info", "product",
        user=(
            "Is the {product} covered by a warranty?",
            "How long is the warranty on the {gadget}?",
            "My {gadget} stopped working after three months, is that covered?",
            "How do I make a warranty claim?",
            "Do you offer extended warranties?",
            "The {product} broke within a year, can I get it repaired for free?",
            "Does the warranty cover accidental damage?",
            "I lost my receipt, is my warranty still valid?",
            "Who handles repairs under warranty, you or the manufacturer?",
        ),
        held_out=(
            "What warranty comes with the {product}?",
            "Is there a guarantee on the {product}?",
            "Can I still claim under warranty?",
            "How does your warranty work?",
            "Does the warranty on the {gadget} cover the battery?",
            "My {product} broke after a few months, does the guarantee apply?",
        ),
        acknowledge=("Good question.", "Let me check the warranty terms.", "Sure, I can help with that."),
        answer=(
            "The {product} comes with a two-year manufacturer warranty.",
            "I've opened a warranty claim; {courier} will collect the {product} for repair on {date}.",
            "Your order history counts as proof of purchase, so the warranty is still valid.",
        ),
    ),
    IntentSpec(
        "product_availability", "product_info", "product",
        user=(
            "Is the {product} in stock?",
            "When will the {product} be available again?",
            "Do you have the {garment} in size {size}?",
            "The {colour} {garment} says sold out, will you restock it?",
            "Can you notify me when the {product} is back?",
            "Can the {product} be delivered to {city} or is it out of stock there?",
            "Are you getting more of the {product} soon?",
            "How many of the {product} do you have left?",
            "Why is everything I want out of stock?",
        ),
        held_out=(
            "Do you still sell the {product}?",
            "Is the {product} back in stock yet?",
            "Can I buy the {garment} in {colour}, or is it sold out?",
            "Do you have any {colour} {garment} left?",
            "Will the {garment} come back in size {size}?",
            "When is the {product} being restocked?",
        ),
        acknowledge=("Let me check our stock.", "Sure, one moment.", "Let me look that up."),
        answer=(
            "The {product} is in stock and ships within 24 hours.",
            "It's sold out right now, but we expect a restock on {date}. I can notify you.",
            "We have a few left in the warehouse, so I'd order soon.",
            "That item has been discontinued, but we have a similar model.",
        ),
    ),
    IntentSpec(
        "product_specs", "product_info", "gadget",
        user=(
            "Is the {gadget} waterproof?",
            "What's the battery life of the {gadget}?",
            "Does the {gadget} work with iPhones?",
            "How much does the {product} weigh?",
            "What are the dimensions of the {product}?",
            "Is the {garment} machine washable?",
            "What material is the {garment} made of?",
            "Does the {gadget} come with a charger?",
            "Can you tell me the technical specifications of this model?",
        ),
        held_out=(
            "Can you give me more details about the {gadget}?",
            "What features does the {gadget} have?",
            "What is the {product} made of?",
            "How big is the {product}?",
            "Is the {gadget} compatible with Android phones?",
            "Is the {garment} made of cotton?",
        ),
        acknowledge=("Good question!", "Let me check the product details.", "Sure, here's what I know."),
        answer=(
            "According to the product page, the {product} weighs 1.2 kg and measures 30 by 20 cm.",
            "I've checked with the supplier: yes, the {product} does.",
            "The full details of the {product} are under the Specifications tab; I've also emailed you the data sheet.",
        ),
    ),
    # ----- shipping options
    IntentSpec(
        "shipping_cost", "shipping_options", "city",
        user=(
            "How much is shipping to {city}?",
            "Do you offer free delivery?",
            "What's the minimum order for free shipping?",
            "Why did I pay {fee} for delivery?",
            "Is express shipping more expensive?",
            "How much would it cost to ship the {product}?",
            "Are delivery charges refunded if I return something?",
            "Shipping costs more than the item, is that right?",
            "What do you charge for next-day delivery to {city}?",
        ),
        held_out=(
            "What are your shipping fees?",
            "How much do you charge for delivery?",
            "What does it cost to send an order to {city}?",
            "Is delivery to {city} free?",
            "How much does shipping the {product} to {city} cost?",
            "Why was I charged {fee} for shipping?",
        ),
        acknowledge=("Sure.", "Let me check the shipping rates.", "Good question."),
        answer=(
            "Standard shipping to {city} costs {fee}, and it's free on orders over £50.",
            "Delivery is free above £40; express delivery is {fee}.",
            "The {fee} you paid was the express fee; standard shipping would have been free.",
        ),
    ),
    IntentSpec(
        "international_shipping", "shipping_options", "country",
        user=(
            "Do you ship to {country}?",
            "Can I order from abroad?",
            "How long does delivery to {country} take?",
            "Will I have to pay customs fees if I order to {country}?",
            "Do you deliver outside the UK?",
            "Which countries do you ship to?",
            "I live in {country}, can I still buy the {product}?",
            "Are international orders tracked?",
            "Is there an extra charge for shipping overseas?",
        ),
        held_out=(
            "Can you send parcels to {country}?",
            "Is shipping to {country} possible?",
            "Do you offer worldwide delivery?",
            "Can I get my order shipped abroad?",
            "How much does it cost to send an order to {country}?",
            "Do you deliver the {product} to {country}?",
        ),
        acknowledge=("Yes, we ship internationally.", "Let me check the international rates.", "Good question."),
        answer=(
            "We ship to {country}; delivery takes 5 to 8 working days and costs {fee}.",
            "Orders to {country} may be charged import duties by local customs.",
            "All international orders are tracked and sent with {courier}.",
        ),
    ),
    IntentSpec(
        "gift_wrapping", "shipping_options", "order_number",
        user=(
            "Can you gift wrap my order?",
            "I'd like the {product} wrapped as a present.",
            "Can I add a gift message to order {order_number}?",
            "Is gift wrapping free?",
            "Please don't include the price, it's a gift.",
            "Do you have birthday wrapping paper?",
            "Can you send the {product} directly to my friend with a card?",
            "I forgot to select gift wrap at checkout for order {order_number}.",
            "What does your gift packaging look like?",
        ),
        held_out=(
            "Is it possible to have my order gift-wrapped?",
            "Do you offer gift wrapping?",
            "Please wrap order {order_number} as a gift.",
            "Could you add gift wrap to order {order_number}?",
            "Can the {product} be wrapped as a birthday present?",
            "Add a gift note to order {order_number}, please.",
        ),
        acknowledge=("What a nice idea!", "Sure, we can do that.", "Of course."),
        answer=(
            "I've added gift wrapping and a card to order {order_number}; the price won't be shown on the receipt.",
            "Gift wrapping costs {fee} and can be selected at checkout.",
            "Done, the {product} will be gift-wrapped and shipped with a personal message.",
        ),
    ),
    # ----- rewards
    IntentSpec(
        "discount_coupon", "rewards", "coupon_code",
        user=(
            "My discount code {coupon_code} isn't working.",
            "Do you have any coupons right now?",
            "Is there a discount for first-time customers?",
            "I forgot to apply my coupon, can you still take it off?",
            "The code {coupon_code} says expired but the email says it's valid until {date}.",
            "Can I use two discount codes on one order?",
            "Are there any sales coming up?",
            "Where do I enter a promo code?",
            "Do students get a discount?",
        ),
        held_out=(
            "Why won't my voucher {coupon_code} apply?",
            "The promo code {coupon_code} gives me an error.",
            "Are there any discounts available at the moment?",
            "Can I get a coupon for my next purchase?",
            "I can't get {coupon_code} to work at checkout.",
            "Is there a discount code for the {product}?",
        ),
        acknowledge=("Let me check that code.", "Sure, let's look at discounts.", "Good question."),
        answer=(
            "The code {coupon_code} expired on {date}, but I've created a new one with the same discount for you.",
            "Right now you can use {coupon_code} for 10% off your first order.",
            "I've applied the discount manually and refunded the difference of {amount}.",
        ),
    ),
    IntentSpec(
        "loyalty_points", "rewards", "email",
        user=(
            "How many loyalty points do I have?",
            "My points from the last order weren't added.",
            "How do I redeem my reward points?",
            "Do loyalty points expire?",
            "I should have {points} points but the app shows zero.",
            "Can I use my points to pay for shipping?",
            "How many points do I earn per purchase?",
            "Check the points balance on {email}, please.",
            "Why did my points disappear?",
        ),
        held_out=(
            "What's my current points balance?",
            "Can you tell me how many reward points I've collected?",
            "I'm missing {points} points from my account.",
            "My balance should include {points} more points.",
            "Where are the {points} points from my last order?",
            "How many points does {email} have?",
        ),
        acknowledge=("Let me check your points.", "Sure, I can look at your rewards.", "Of course."),
        answer=(
            "You currently have {points} points, worth about {amount} on your next order.",
            "The points from your last order were pending; I've added them now.",
            "Points expire after 12 months, and you can redeem them at checkout.",
        ),
    ),
)

INTENT_SPECS: dict[str, IntentSpec] = {spec.name: spec for spec in _INTENT_SPECS}
MAIN_INTENTS: tuple[str, ...] = tuple(INTENT_SPECS)
INTENT_GROUPS: dict[str, tuple[str, ...]] = {
    group: tuple(spec.name for spec in _INTENT_SPECS if spec.group == group)
    for group in dict.fromkeys(spec.group for spec in _INTENT_SPECS)
}

# The agent's questions for a missing detail and the user's replies, by slot type.
_ASK = {
    "order_number": ("Could you give me the order number?", "What's the order number, please?",
                     "Can you share the order number so I can look it up?",
                     "Which order is this about? The number is in your confirmation email."),
    "email": ("Which email address is the account registered with?", "Could you tell me the email on your account?",
              "What's the email address you signed up with?"),
    "product": ("Which product are you asking about?", "Could you tell me which item you mean?",
                "What's the name of the product?"),
    "city": ("Which city is it going to?", "Where should it be delivered?", "What city are you in?"),
    "country": ("Which country would it be shipped to?", "Where are you ordering from?"),
    "payment_method": ("Which payment method did you use?", "How were you trying to pay?"),
    "coupon_code": ("Which code are you using?", "Could you tell me the coupon code?"),
}
_INFORM = {
    "order_number": ("It's {order_number}.", "The order number is {order_number}.", "Sure, it's order {order_number}.",
                     "{order_number}", "Order {order_number}.", "Let me check... it's {order_number}.",
                     "I think it's {order_number}."),
    "email": ("It's {email}.", "My email is {email}.", "{email}", "The account is registered under {email}.",
              "I use {email}."),
    "product": ("It's the {product}.", "The {product}.", "I mean the {product}.", "I'm asking about the {product}."),
    "city": ("{city}.", "I'm in {city}.", "It's going to {city}.", "The address is in {city}."),
    "country": ("{country}.", "I live in {country}.", "It would go to {country}."),
    "payment_method": ("I used {payment_method}.", "{payment_method}.", "With {payment_method}.",
                       "I tried {payment_method}."),
    "coupon_code": ("The code is {coupon_code}.", "{coupon_code}.", "It's {coupon_code}.", "I typed {coupon_code}."),
}
# The agent's first words after the user supplied the detail; "" answers straight away.
_AFTER_INFORM = ("", "Thanks.", "Thank you.", "Got it.", "Thanks, I've found it.")

_DIALOGUE_ACTS = {
    "greeting": {
        USER: ("Hi.", "Hello!", "Hi there.", "Good morning.", "Good afternoon.", "Hey, is anyone there?",
               "Hello, I need some help.", "Hi, can you help me?"),
        AGENT: ("Hello! How can I help you today?", "Hi, thanks for contacting ShopLane. What can I do for you?",
                "Good day! What can I help you with?", "Welcome to ShopLane customer service. How may I help?",
                "Hi! Tell me what's going on and I'll take a look."),
    },
    "thanks": {
        USER: ("Thanks a lot!", "Great, thank you.", "Perfect, thanks for your help.", "Thank you so much.",
               "That's helpful, thanks.", "Okay, thanks.", "Brilliant, cheers.", "Thanks, that solves it."),
        AGENT: ("You're welcome! Is there anything else I can help with?", "My pleasure. Anything else?",
                "Happy to help! Do you need anything else today?",
                "No problem at all. Is there something else I can do for you?"),
    },
    "goodbye": {
        USER: ("No, that's all. Bye!", "That's everything, goodbye.", "Nothing else, have a nice day.",
               "All good, bye.", "That's it for now, bye."),
        AGENT: ("Have a great day!", "Thanks for shopping with us. Goodbye!", "Take care, and enjoy your purchase!",
                "Glad I could help. Bye!"),
    },
}
# Words a request may start with: a greeting when there is no greeting pair, a transition for
# the second intent. The request's first letter is lower-cased after them.
_GREETING_OPENERS = ("Hi, ", "Hello, ", "Hey, ", "Good morning, ", "Hi there, ", "Good evening, ", "Hello there, ")
_SWITCH_OPENERS = ("Also, ", "One more thing: ", "Oh, and ", "While I have you, ", "Another question: ",
                   "By the way, ", "Actually, ")
# Sign-offs a request sometimes ends with.
_CLOSERS = (" Thanks!", " Thanks in advance.", " Cheers.", " Any help is appreciated.")

INFORM_INTENTS: tuple[str, ...] = tuple(f"inform_{slot_type}" for slot_type in _INFORM)
DIALOGUE_ACT_INTENTS: tuple[str, ...] = tuple(_DIALOGUE_ACTS)
INTENTS: tuple[str, ...] = MAIN_INTENTS + INFORM_INTENTS + DIALOGUE_ACT_INTENTS

DSTS_RULE = (
    "D-STS scores of the demo corpus are assigned by a rule on each sentence's intent and slot "
    "values, not by annotators: 5 = same intent and identical slot values (the same slot types "
    "filled with the same values; two sentences without slots count as identical), i.e. "
    "paraphrases; 4 = same intent, different slot values (a slot type only one sentence has, or "
    "a shared slot type with different values); 3 = different intents of the same intent group; "
    "2 = intents of different groups whose sentences share at least one slot type (both name an "
    "order number, a product, a city, ...); 1 = different groups and no shared slot type. "
    "Intent groups: " + "; ".join(f"{group}: {', '.join(names)}" for group, names in INTENT_GROUPS.items())
    + ". Slot types: " + ", ".join(sorted({slot_type for slot_type, _ in _PLACEHOLDERS.values()}))
    + ". Pairs are sampled stratified, an equal share per score; the second sentence of a score-5 "
    "pair is rendered from another held-out template of the same intent with the first sentence's "
    "slot values. All evaluation sentences are user requests of held-out dialogues, written with "
    "templates the training corpus never uses."
)

# ---------------------------------------------------------------------------------------------
# Rendering.

_FIELDS: dict[str, tuple[str, ...]] = {}


def template_fields(template: str) -> tuple[str, ...]:
    """The placeholder names of `template`, in order (parsed once per template)."""
    fields = _FIELDS.get(template)
    if fields is None:
        fields = tuple(name for _, name, _, _ in string.Formatter().parse(template) if name)
        _FIELDS[template] = fields
    return fields


def _sample(placeholder: str, rng: random.Random) -> str:
    source = _PLACEHOLDERS[placeholder][1]
    return rng.choice(source) if isinstance(source, tuple) else source(rng)


def _fits(placeholder: str, value: str) -> bool:
    pool = _POOL_SETS.get(placeholder)
    return pool is None or value in pool


def _render(template: str, rng: random.Random, state: dict[str, str]) -> tuple[str, tuple[tuple[str, str], ...]]:
    """Fills `template`, reusing the dialogue's value of a slot type where it fits.

    New values are stored in `state` (slot type -> value), so later turns refer to the same
    order, product or email. Returns the text and its slots as sorted (slot type, value) pairs.
    """
    filled = {}
    for name in template_fields(template):
        slot_type = _PLACEHOLDERS[name][0]
        value = state.get(slot_type)
        if value is None or not _fits(name, value):
            value = _sample(name, rng)
            state[slot_type] = value
        filled[name] = value
    slots = tuple(sorted({_PLACEHOLDERS[name][0]: value for name, value in filled.items()}.items()))
    return template.format(**filled), slots


def _render_with(template: str, slots: tuple[tuple[str, str], ...]) -> str | None:
    """`template` filled with exactly `slots`; None when the slot types differ or a value does not fit."""
    values = dict(slots)
    fields = template_fields(template)
    if sorted(_PLACEHOLDERS[name][0] for name in fields) != sorted(values):
        return None
    filled = {name: values[_PLACEHOLDERS[name][0]] for name in fields}
    if not all(_fits(name, value) for name, value in filled.items()):
        return None
    return template.format(**filled)


def _after_opener(template: str) -> str:
    # "Also, where is ..." but "Also, I ordered ..." and "Also, DPD says ..." (a placeholder
    # may start with a proper name, so it is never lower-cased).
    first_word = template.split(" ", 1)[0]
    if template.startswith("{") or first_word == "I" or first_word.startswith("I'"):
        return template
    return template[0].lower() + template[1:]


@dataclasses.dataclass(frozen=True)
class DemoUtterance:
    """One generated utterance with the metadata the evaluation rules use.

    `slots` are sorted (slot type, value) pairs of the values the template was filled with;
    `template` is the request template (empty for agent turns and dialogue acts).
    """

    speaker: str
    text: str
    intent: str
    slots: tuple[tuple[str, str], ...] = ()
    template: str = ""

    @property
    def group(self) -> str:
        return INTENT_SPECS[self.intent].group if self.intent in INTENT_SPECS else self.intent


def _agent(intent: str, *parts: str) -> DemoUtterance:
    return DemoUtterance(AGENT, " ".join(part for part in parts if part), intent)


def _episode(rng: random.Random, spec: IntentSpec, state: dict[str, str], opener: str,
             held_out: bool) -> list[DemoUtterance]:
    """The user's request of `spec`, the agent's question and the user's reply if a detail is missing, the answer."""
    template = rng.choice(spec.held_out if held_out else spec.user)
    text, slots = _render(_after_opener(template) if opener else template, rng, state)
    closer = rng.choice(_CLOSERS) if rng.random() < 0.15 else ""
    turns = [DemoUtterance(USER, opener + text + closer, spec.name, slots, template)]
    acknowledge = rng.choice(spec.acknowledge)
    needed = _PLACEHOLDERS[spec.ask][0] if spec.ask else None
    if needed is not None and needed not in state:
        turns.append(_agent(spec.name, acknowledge, rng.choice(_ASK[needed])))
        value = _sample(spec.ask, rng)
        state[needed] = value
        reply = rng.choice(_INFORM[needed]).format(**{needed: value})
        turns.append(DemoUtterance(USER, reply, f"inform_{needed}", ((needed, value),)))
        answer, _ = _render(rng.choice(spec.answer), rng, state)
        turns.append(_agent(spec.name, rng.choice(_AFTER_INFORM), answer))
    else:
        answer, _ = _render(rng.choice(spec.answer), rng, state)
        turns.append(_agent(spec.name, acknowledge if rng.random() < 0.6 else "", answer))
    return turns


def _act_pair(rng: random.Random, act: str) -> list[DemoUtterance]:
    return [DemoUtterance(USER, rng.choice(_DIALOGUE_ACTS[act][USER]), act),
            DemoUtterance(AGENT, rng.choice(_DIALOGUE_ACTS[act][AGENT]), act)]


def _second_intent(rng: random.Random, first: IntentSpec) -> IntentSpec:
    # Real switches mostly stay near the first problem (a refund after a return, an invoice
    # after a failed payment); some jump anywhere.
    same_group = [name for name in INTENT_GROUPS[first.group] if name != first.name]
    if rng.random() < 0.6:
        return INTENT_SPECS[rng.choice(same_group)]
    return INTENT_SPECS[rng.choice([name for name in MAIN_INTENTS if name != first.name])]


def _dialogue_utterances(rng: random.Random, held_out: bool) -> list[DemoUtterance]:
    state: dict[str, str] = {}
    first = INTENT_SPECS[rng.choice(MAIN_INTENTS)]
    greeting = _act_pair(rng, "greeting") if rng.random() < 0.35 else []
    opener = "" if greeting or rng.random() < 0.7 else rng.choice(_GREETING_OPENERS)
    episodes = _episode(rng, first, state, opener, held_out)
    if rng.random() < 0.3:
        episodes += _episode(rng, _second_intent(rng, first), state, rng.choice(_SWITCH_OPENERS), held_out)
    thanks = _act_pair(rng, "thanks") if rng.random() < 0.75 else []
    goodbye = _act_pair(rng, "goodbye") if rng.random() < 0.5 else []
    # Optional pairs give way, greeting first, so the longest draw still fits MAX_TURNS;
    # a lone short episode gets its closing thanks so the shortest reaches MIN_TURNS.
    if len(greeting) + len(episodes) + len(thanks) + len(goodbye) > MAX_TURNS:
        greeting = []
    if len(episodes) + len(thanks) + len(goodbye) > MAX_TURNS:
        goodbye = []
    if len(greeting) + len(episodes) + len(thanks) + len(goodbye) < MIN_TURNS:
        thanks = _act_pair(rng, "thanks")
    return greeting + episodes + thanks + goodbye


def generate_utterance_dialogues(num_dialogues: int, seed: int | str,
                                 held_out: bool = False) -> list[list[DemoUtterance]]:
    """Dialogues as lists of `DemoUtterance` (with slots), from `random.Random(seed)` only.

    `held_out=True` draws every user request from the held-out templates, for evaluation
    dialogues; everything else (agent turns, informs, dialogue acts) is shared.
    """
    if num_dialogues < 0:
        raise ValueError(f"num_dialogues must be >= 0, got {num_dialogues}")
    rng = random.Random(seed)
    return [_dialogue_utterances(rng, held_out) for _ in range(num_dialogues)]


def generate_dialogues(num_dialogues: int = 3000, seed: int = 0) -> list[Dialogue]:
    """The demo training corpus: `num_dialogues` dialogues, identical for the same seed.

    Ids are "demo-<seed>-<index>"; speakers "user"/"agent"; every turn has an intent.
    """
    return [
        Dialogue(
            dialogue_id=f"demo-{seed}-{index:05d}",
            turns=tuple(Turn(speaker=u.speaker, text=u.text, intent=u.intent) for u in utterances),
        )
        for index, utterances in enumerate(generate_utterance_dialogues(num_dialogues, seed))
    ]


def distinct_texts(dialogues: Iterable[Dialogue]) -> list[str]:
    """Every utterance text once, in order of first occurrence."""
    return list(dict.fromkeys(turn.text for dialogue in dialogues for turn in dialogue.turns))


def eval_seed(seed: int) -> str:
    # A string seed gives an independent stream; str seeding is SHA-512 based, so it does not
    # depend on PYTHONHASHSEED.
    return f"demo-eval-{seed}"


def generate_eval_utterances(num_dialogues: int, seed: int,
                             exclude: Iterable[str] = ()) -> tuple[list[DemoUtterance], int]:
    """The evaluation sentences: distinct user requests of main intents from held-out dialogues.

    Dialogues come from `eval_seed(seed)` with held-out request templates. Texts in `exclude`
    (the training utterances) are removed; returns (utterances, number removed that way).
    """
    excluded = set(exclude)
    seen: set[str] = set()
    kept, removed = [], 0
    for utterances in generate_utterance_dialogues(num_dialogues, eval_seed(seed), held_out=True):
        for utterance in utterances:
            if utterance.speaker != USER or utterance.intent not in INTENT_SPECS or utterance.text in seen:
                continue
            seen.add(utterance.text)
            if utterance.text in excluded:
                removed += 1
                continue
            kept.append(utterance)
    return kept, removed


# ---------------------------------------------------------------------------------------------
# D-STS.


def dsts_score(a: DemoUtterance, b: DemoUtterance) -> int:
    """The D-STS score of a pair by the module's rule (see `DSTS_RULE`)."""
    if a.intent == b.intent:
        return 5 if a.slots == b.slots else 4
    if a.group == b.group:
        return 3
    if {slot_type for slot_type, _ in a.slots} & {slot_type for slot_type, _ in b.slots}:
        return 2
    return 1


def _paraphrase(rng: random.Random, utterance: DemoUtterance, excluded: set[str]) -> DemoUtterance | None:
    """Another held-out template of the same intent filled with the same slot values, if any."""
    options = []
    for template in INTENT_SPECS[utterance.intent].held_out:
        text = _render_with(template, utterance.slots) if template != utterance.template else None
        if text is not None and text != utterance.text and text not in excluded:
            options.append((template, text))
    if not options:
        return None
    template, text = rng.choice(options)
    return DemoUtterance(USER, text, utterance.intent, utterance.slots, template)


def sample_dsts_pairs(utterances: Sequence[DemoUtterance], num_pairs: int, seed: int | str,
                      exclude: Iterable[str] = ()) -> list[tuple[int, DemoUtterance, DemoUtterance]]:
    """Samples `num_pairs` scored pairs, stratified over the 5 scores; deterministic for a seed.

    Each score gets `num_pairs // 5` pairs, the remainder going to the lowest scores. For each
    score, candidate pairs are drawn where that score is likely and kept only when `dsts_score`
    gives exactly it; no unordered text pair repeats and a pair's texts differ. A score that runs
    out of candidates (tiny pools) gets fewer pairs. Score-5 partners are rendered paraphrases
    (not in `exclude`). Returns (score, a, b) in shuffled order.
    """
    if num_pairs < 0:
        raise ValueError(f"num_pairs must be >= 0, got {num_pairs}")
    if not utterances or num_pairs == 0:
        return []
    rng = random.Random(seed)
    excluded = set(exclude)
    by_intent: dict[str, list[DemoUtterance]] = {}
    by_group: dict[str, list[DemoUtterance]] = {}
    by_slot_type: dict[str, list[DemoUtterance]] = {}
    for u in utterances:
        by_intent.setdefault(u.intent, []).append(u)
        by_group.setdefault(u.group, []).append(u)
        for slot_type, _ in u.slots:
            by_slot_type.setdefault(slot_type, []).append(u)
    with_slots = [u for u in utterances if u.slots]

    def candidate(score: int) -> tuple[DemoUtterance, DemoUtterance | None]:
        if score == 5:
            a = rng.choice(utterances)
            return a, _paraphrase(rng, a, excluded)
        if score == 4:
            a = rng.choice(utterances)
            return a, rng.choice(by_intent[a.intent])
        if score == 3:
            a = rng.choice(utterances)
            return a, rng.choice(by_group[a.group])
        if score == 2 and with_slots:
            a = rng.choice(with_slots)
            return a, rng.choice(by_slot_type[rng.choice(a.slots)[0]])
        return rng.choice(utterances), rng.choice(utterances)

    base, remainder = divmod(num_pairs, NUM_STS_SCORES)
    pairs: list[tuple[int, DemoUtterance, DemoUtterance]] = []
    seen: set[frozenset[str]] = set()
    for score in range(1, NUM_STS_SCORES + 1):
        target = base + (1 if score <= remainder else 0)
        found, attempts = 0, 0
        while found < target and attempts < 50 * target:
            attempts += 1
            a, b = candidate(score)
            if b is None or a.text == b.text or dsts_score(a, b) != score:
                continue
            key = frozenset((a.text, b.text))
            if key in seen:
                continue
            seen.add(key)
            pairs.append((score, a, b) if rng.random() < 0.5 else (score, b, a))
            found += 1
    rng.shuffle(pairs)
    return pairs


# ---------------------------------------------------------------------------------------------
# The stage.

TRAIN_FILE = "train.jsonl"
TRAIN_SENTENCES_FILE = "train_sentences.txt"
SR_FILE = os.path.join("sr", "select.txt")
STS_FILE = os.path.join("sts", "sts.txt")
STS_METADATA_FILE = os.path.join("sts", "sts_metadata.jsonl")
INTENT_FILE = os.path.join("intent", "intent.json")
DIALOGUES_FILE = os.path.join("dialogues", "eval_dialogues.jsonl")
STATS_FILE = "demo_stats.json"
# The intent group whose requests are the out-of-scope queries of the intent set: its intents
# get no prototype, as CLINC150's oos queries have no intent among its 150.
OOS_GROUP = "rewards"


@dataclasses.dataclass(frozen=True)
class DemoCorpusConfig:
    """The demo corpus: training dialogues plus held-out SR and D-STS sets."""

    output_dir: str
    num_dialogues: int = 3000
    num_eval_dialogues: int = 1000
    random_seed: int = 0
    num_sr_candidates: int = 100
    max_sr_positives: int = 30
    num_sts_pairs: int = 800
    intent_support_fraction: float = 0.5


def split_intent_set(utterances: Sequence[DemoUtterance], support_fraction: float, seed: int | str) -> dict:
    """The intent set (the CLINC150 object layout `data/intent.py` reads) from evaluation sentences.

    Per intent, the sentences are shuffled with `random.Random(seed)` and the first
    `support_fraction` (rounded up) go to the support pool (`train`), the rest to `test`.
    Intents of `OOS_GROUP` go to `oos_train` / `oos_test` the same way: out-of-scope queries.
    """
    rng = random.Random(seed)
    by_intent: dict[str, list[str]] = {}
    for utterance in utterances:
        by_intent.setdefault(utterance.intent, []).append(utterance.text)
    split: dict[str, list] = {"train": [], "test": [], "oos_train": [], "oos_test": []}
    for intent in sorted(by_intent):
        texts = by_intent[intent]
        rng.shuffle(texts)
        cut = math.ceil(len(texts) * support_fraction)
        oos = INTENT_SPECS[intent].group == OOS_GROUP
        label = OOS_LABEL if oos else intent
        split["oos_train" if oos else "train"] += [[text, label] for text in texts[:cut]]
        split["oos_test" if oos else "test"] += [[text, label] for text in texts[cut:]]
    return split


def labelled_eval_dialogues(num_dialogues: int, seed: int) -> list[Dialogue]:
    """The held-out evaluation dialogues (the stream the evaluation sentences come from), each
    with `services` = the intent groups of its requests, for the dialogue-level evaluations:
    a dialogue with one group is labelled by it, one that switches groups is dropped there."""
    dialogues = []
    for index, utterances in enumerate(generate_utterance_dialogues(num_dialogues, eval_seed(seed), held_out=True)):
        groups = tuple(sorted({u.group for u in utterances if u.intent in INTENT_SPECS}))
        dialogues.append(Dialogue(
            dialogue_id=f"demo-eval-{seed}-{index:05d}",
            turns=tuple(Turn(speaker=u.speaker, text=u.text, intent=u.intent) for u in utterances),
            services=groups))
    return dialogues


def _write_lines(path: str, lines: Iterable[str]) -> None:
    with atomic_open(path, "w", encoding="utf-8", newline="\n") as f:
        for line in lines:
            f.write(line)
            f.write("\n")


def _utterance_metadata(u: DemoUtterance) -> dict:
    return {"intent": u.intent, "group": u.group, "slots": dict(u.slots)}


def run_generate_demo_corpus(config: DemoCorpusConfig, log=print) -> dict:
    """Writes the demo corpus and its evaluation sets into `config.output_dir`; returns the stats.

    Files: train.jsonl (`write_jsonl`), train_sentences.txt (distinct training utterances, for
    fitting whitening / flow), sr/select.txt, sts/sts.txt, sts/sts_metadata.jsonl (per pair:
    score, sentences, intents, groups, slots), intent/intent.json (`split_intent_set`),
    dialogues/eval_dialogues.jsonl (`labelled_eval_dialogues`), config.json and demo_stats.json. Everything is
    generated before the first file is written, so a run that fails leaves no partial corpus.
    """
    if config.num_dialogues < 1 or config.num_eval_dialogues < 1:
        raise ValueError(f"need num_dialogues >= 1 and num_eval_dialogues >= 1, got "
                         f"{config.num_dialogues}, {config.num_eval_dialogues}")
    if config.num_sts_pairs < NUM_STS_SCORES:
        raise ValueError(f"num_sts_pairs must be >= {NUM_STS_SCORES} (one per score), got {config.num_sts_pairs}")
    if config.num_sr_candidates < 1 or config.max_sr_positives < 1:
        raise ValueError(f"need num_sr_candidates >= 1 and max_sr_positives >= 1, got "
                         f"{config.num_sr_candidates}, {config.max_sr_positives}")
    if not 0.0 < config.intent_support_fraction < 1.0:
        raise ValueError(f"intent_support_fraction must be in (0, 1), got {config.intent_support_fraction}")
    start = time.perf_counter()
    out = config.output_dir
    if os.path.exists(out) and not os.path.isdir(out):
        raise FileExistsError(f"output_dir {out} exists and is not a folder")

    dialogues = generate_dialogues(config.num_dialogues, config.random_seed)
    generation_seconds = time.perf_counter() - start
    train_texts = distinct_texts(dialogues)
    turns = sum(len(d.turns) for d in dialogues)
    log(f"[demo] {len(dialogues)} training dialogues, {turns} turns, {len(train_texts)} distinct "
        f"utterances ({generation_seconds:.2f} s)")

    eval_utterances, overlap = generate_eval_utterances(config.num_eval_dialogues, config.random_seed, train_texts)
    log(f"[demo] {len(eval_utterances)} held-out evaluation sentences from {config.num_eval_dialogues} "
        f"dialogues ({overlap} removed as training text)")

    rows, sr_stats = build_sr_set([(u.text, u.intent) for u in eval_utterances],
                                  config.num_sr_candidates, config.max_sr_positives)
    log(f"[demo] {len(rows)} SR queries (mean {sr_stats['mean_positives']:.1f} positives, "
        f"{sr_stats['mean_negatives']:.1f} negatives)")

    pairs = sample_dsts_pairs(eval_utterances, config.num_sts_pairs, f"demo-sts-{config.random_seed}", train_texts)
    per_score = {str(score): sum(1 for s, _, _ in pairs if s == score) for score in range(1, NUM_STS_SCORES + 1)}
    log(f"[demo] {len(pairs)} D-STS pairs, per score {per_score}")

    intent_set = split_intent_set(eval_utterances, config.intent_support_fraction,
                                  f"demo-intent-{config.random_seed}")
    eval_dialogues = labelled_eval_dialogues(config.num_eval_dialogues, config.random_seed)
    single_group = sum(1 for d in eval_dialogues if len(d.services) == 1)
    log(f"[demo] intent set: {len(intent_set['train'])} support / {len(intent_set['test'])} test sentences, "
        f"{len(intent_set['oos_train'])} / {len(intent_set['oos_test'])} out-of-scope ({OOS_GROUP}); "
        f"{single_group} of {len(eval_dialogues)} evaluation dialogues stay within one intent group")

    intent_counts: dict[str, int] = {}
    for dialogue in dialogues:
        for turn in dialogue.turns:
            intent_counts[turn.intent] = intent_counts.get(turn.intent, 0) + 1
    turn_histogram: dict[str, int] = {}
    for dialogue in dialogues:
        turn_histogram[str(len(dialogue.turns))] = turn_histogram.get(str(len(dialogue.turns)), 0) + 1

    write_jsonl(dialogues, os.path.join(out, TRAIN_FILE))
    _write_lines(os.path.join(out, TRAIN_SENTENCES_FILE), train_texts)
    write_select_file(rows, os.path.join(out, SR_FILE))
    write_json(os.path.join(out, INTENT_FILE), intent_set)
    write_jsonl(eval_dialogues, os.path.join(out, DIALOGUES_FILE))
    _write_lines(os.path.join(out, STS_FILE), (f"{score}\t{a.text}\t{b.text}" for score, a, b in pairs))
    _write_lines(os.path.join(out, STS_METADATA_FILE), (
        json.dumps({"score": score, "sentence_a": a.text, "sentence_b": b.text,
                    "a": _utterance_metadata(a), "b": _utterance_metadata(b)}, ensure_ascii=False)
        for score, a, b in pairs))
    log(f"[demo] wrote {TRAIN_FILE}, {TRAIN_SENTENCES_FILE}, {SR_FILE}, {STS_FILE}, {STS_METADATA_FILE}, "
        f"{INTENT_FILE} and {DIALOGUES_FILE} into {out}")
    stats = {
        "dialogues": len(dialogues),
        "turns": turns,
        "turns_per_dialogue": dict(sorted(turn_histogram.items(), key=lambda item: int(item[0]))),
        "utterances_distinct": len(train_texts),
        "intents": len(intent_counts),
        "utterances_per_intent": dict(sorted(intent_counts.items())),
        "eval_dialogues": config.num_eval_dialogues,
        "eval_sentences": len(eval_utterances),
        "eval_overlap_removed": overlap,
        "sr_queries": len(rows),
        "sr": sr_stats,
        "sts_pairs": len(pairs),
        "sts_pairs_per_score": per_score,
        "intent_support": len(intent_set["train"]),
        "intent_test": len(intent_set["test"]),
        "intent_oos_support": len(intent_set["oos_train"]),
        "intent_oos_test": len(intent_set["oos_test"]),
        "intent_oos_group": OOS_GROUP,
        "eval_dialogues_single_group": single_group,
        "generation_seconds": round(generation_seconds, 3),
        "total_seconds": round(time.perf_counter() - start, 3),
    }
    write_config(config, out)
    write_json(os.path.join(out, STATS_FILE), stats)
    log(f"[demo] done in {stats['total_seconds']:.2f} s -> {os.path.join(out, STATS_FILE)}")
    return stats
