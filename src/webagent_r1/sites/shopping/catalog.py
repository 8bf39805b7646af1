"""Word lists the shop's catalogue is generated from: categories, brands, nouns, attributes.

Each leaf category lists the nouns its products are named after, a price range, and which
options (color, size) its products carry. Product names are ``<Brand> <Adjective> <Noun>``,
unique across the catalogue, so tasks can name one product unambiguously.
"""

from __future__ import annotations

from dataclasses import dataclass

from webagent_r1.sites.seed_utils import words


@dataclass(frozen=True)
class Leaf:
    """A leaf category: product nouns, price range, option kinds."""

    name: str
    nouns: tuple[str, ...]
    price: tuple[float, float]
    colors: tuple[str, ...] = ()
    sizes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Top:
    """A top-level category with its brands, selling points and leaves."""

    name: str
    brands: tuple[str, ...]
    features: tuple[str, ...]
    leaves: tuple[Leaf, ...]


BASIC_COLORS = ("Black", "White", "Gray", "Navy", "Blue", "Red", "Green", "Pink", "Beige")
BRIGHT_COLORS = ("Black", "White", "Red", "Blue", "Green", "Yellow", "Purple", "Orange", "Pink")
METAL_COLORS = ("Gold", "Silver", "Rose Gold")
APPAREL_SIZES = ("XS", "S", "M", "L", "XL", "XXL")
SHOE_SIZES = ("6", "7", "8", "9", "10", "11", "12")
BED_SIZES = ("Twin", "Full", "Queen", "King")

ADJECTIVES = words(
    "Classic Premium Ultra Compact Deluxe Essential Pro Signature Elite Everyday Modern Sleek "
    "Nova Aero Zen Urban Alpine Coastal Midnight Golden Arctic Harbor Summit Vista Prime Fusion "
    "Luxe Pure Bold Swift Radiant Cozy Heritage Velvet Crystal Solar Lunar Breeze Cedar Sierra"
)

CATALOG: tuple[Top, ...] = (
    Top(
        "Electronics",
        ("Orbit", "Voltix", "Soniq", "Lumen", "Kestrel", "Zentra", "Nimbus", "Arcwave"),
        (
            "fast and reliable performance",
            "a two-year limited warranty",
            "broad compatibility with phones, tablets and laptops",
            "a compact design that fits in any bag",
            "energy-efficient components",
        ),
        (
            Leaf(
                "Chargers & Power",
                (
                    "Charger",
                    "Power Bank",
                    "Wall Adapter",
                    "Charging Cable",
                    "Car Charger",
                    "Charging Stand",
                ),
                (9, 79),
                ("Black", "White", "Gray"),
            ),
            Leaf(
                "Headphones",
                ("Earbuds", "Headphones", "Headset", "Earphones", "Sport Earbuds"),
                (19, 249),
                ("Black", "White", "Navy", "Red", "Silver"),
            ),
            Leaf(
                "Cameras",
                (
                    "Action Camera",
                    "Webcam",
                    "Dash Cam",
                    "Instant Camera",
                    "Camera Tripod",
                    "Security Camera",
                ),
                (29, 399),
            ),
            Leaf(
                "Computer Accessories",
                (
                    "Wireless Mouse",
                    "Keyboard",
                    "USB Hub",
                    "Laptop Stand",
                    "Mouse Pad",
                    "Laptop Sleeve",
                ),
                (9, 129),
                ("Black", "White", "Gray", "Blue"),
            ),
            Leaf(
                "Speakers",
                ("Bluetooth Speaker", "Soundbar", "Smart Speaker", "Bookshelf Speakers"),
                (25, 299),
                ("Black", "White", "Blue", "Red"),
            ),
            Leaf(
                "Cell Phone Accessories",
                ("Phone Case", "Screen Protector", "Phone Mount", "Phone Grip", "Selfie Stick"),
                (6, 49),
                ("Black", "Clear", "Blue", "Pink", "Green"),
            ),
        ),
    ),
    Top(
        "Home & Kitchen",
        ("Hearthly", "Casa Verde", "Oakridge", "Brightnest", "Kitchora", "Maple & Co"),
        (
            "dishwasher-safe parts",
            "durable, food-safe materials",
            "an easy-to-clean finish",
            "a timeless look that suits any home",
            "a space-saving design",
        ),
        (
            Leaf(
                "Cookware",
                ("Frying Pan", "Saucepan", "Dutch Oven", "Stock Pot", "Wok", "Grill Pan"),
                (19, 189),
                ("Black", "Red", "Gray", "Blue"),
            ),
            Leaf(
                "Mugs & Drinkware",
                ("Coffee Mug", "Travel Mug", "Tumbler", "Water Bottle", "Teacup", "Glass Set"),
                (7, 45),
                BASIC_COLORS,
            ),
            Leaf(
                "Bedding",
                ("Sheet Set", "Duvet Cover", "Pillow", "Comforter", "Throw Blanket", "Quilt"),
                (19, 199),
                ("White", "Gray", "Navy", "Beige", "Green", "Pink"),
                BED_SIZES,
            ),
            Leaf(
                "Storage & Organization",
                (
                    "Storage Bin",
                    "Shelf Organizer",
                    "Drawer Divider",
                    "Laundry Basket",
                    "Shoe Rack",
                    "Spice Rack",
                ),
                (9, 89),
                ("White", "Gray", "Black", "Beige"),
            ),
            Leaf(
                "Lighting",
                (
                    "Desk Lamp",
                    "Floor Lamp",
                    "LED Strip",
                    "Night Light",
                    "Table Lamp",
                    "Ceiling Light",
                ),
                (12, 159),
                ("Black", "White", "Gold", "Silver"),
            ),
            Leaf(
                "Small Appliances",
                (
                    "Blender",
                    "Toaster",
                    "Electric Kettle",
                    "Coffee Maker",
                    "Air Fryer",
                    "Hand Mixer",
                ),
                (24, 249),
                ("Black", "White", "Red", "Silver"),
            ),
        ),
    ),
    Top(
        "Beauty & Personal Care",
        ("Luminelle", "Verdana Botanics", "Purely", "Glowlab", "Silkroot"),
        (
            "dermatologist-tested ingredients",
            "no parabens or sulfates",
            "a light, fresh scent",
            "cruelty-free formulation",
            "results you can see in two weeks",
        ),
        (
            Leaf(
                "Skin Care",
                ("Face Cream", "Serum", "Cleanser", "Sunscreen", "Face Mask", "Toner"),
                (8, 69),
            ),
            Leaf(
                "Hair Care",
                ("Shampoo", "Conditioner", "Hair Oil", "Hair Dryer", "Hair Brush", "Curling Iron"),
                (7, 129),
            ),
            Leaf(
                "Makeup",
                ("Lipstick", "Mascara", "Foundation", "Eyeshadow Palette", "Blush", "Eyeliner"),
                (6, 49),
                ("Red", "Pink", "Nude", "Brown", "Black", "Coral"),
            ),
            Leaf(
                "Fragrance",
                ("Eau de Parfum", "Body Mist", "Cologne", "Perfume Oil", "Gift Set"),
                (15, 120),
            ),
        ),
    ),
    Top(
        "Sports & Outdoors",
        ("Trailpeak", "Ironcore", "Summit Ridge", "Velocita", "Stride"),
        (
            "weather-resistant construction",
            "a lightweight build for all-day use",
            "a non-slip grip",
            "reinforced stitching",
            "a lifetime guarantee",
        ),
        (
            Leaf(
                "Camping & Hiking",
                (
                    "Tent",
                    "Sleeping Bag",
                    "Hiking Backpack",
                    "Headlamp",
                    "Camping Stove",
                    "Trekking Poles",
                ),
                (15, 299),
                ("Green", "Orange", "Gray", "Blue"),
            ),
            Leaf(
                "Fitness",
                (
                    "Yoga Mat",
                    "Dumbbell Set",
                    "Resistance Bands",
                    "Jump Rope",
                    "Kettlebell",
                    "Foam Roller",
                ),
                (9, 149),
                ("Black", "Purple", "Blue", "Pink", "Gray"),
            ),
            Leaf(
                "Cycling",
                ("Bike Helmet", "Bike Light", "Bike Lock", "Cycling Gloves", "Bike Pump"),
                (12, 119),
                ("Black", "White", "Red", "Yellow"),
            ),
            Leaf(
                "Team Sports",
                ("Soccer Ball", "Basketball", "Volleyball", "Baseball Glove", "Tennis Racket"),
                (14, 159),
            ),
        ),
    ),
    Top(
        "Clothing, Shoes & Jewelry",
        ("Northwind", "Aurelia", "Fieldstone", "Marlowe", "Cobalt & Pine", "Vantage"),
        (
            "soft, breathable fabric",
            "a relaxed, true-to-size fit",
            "machine-washable care",
            "a versatile style for work or weekend",
            "premium materials built to last",
        ),
        (
            Leaf(
                "Men's Clothing",
                ("T-Shirt", "Hoodie", "Polo Shirt", "Chinos", "Jacket", "Sweater"),
                (14, 129),
                BASIC_COLORS,
                APPAREL_SIZES,
            ),
            Leaf(
                "Women's Clothing",
                ("Blouse", "Cardigan", "Dress", "Leggings", "Rain Jacket", "Tunic"),
                (16, 139),
                BASIC_COLORS,
                APPAREL_SIZES,
            ),
            Leaf(
                "Shoes",
                ("Running Shoes", "Sneakers", "Hiking Boots", "Sandals", "Loafers", "Slippers"),
                (24, 169),
                ("Black", "White", "Gray", "Navy", "Brown", "Red"),
                SHOE_SIZES,
            ),
            Leaf(
                "Jewelry",
                ("Necklace", "Bracelet", "Earrings", "Ring", "Watch", "Pendant"),
                (15, 249),
                METAL_COLORS,
            ),
            Leaf(
                "Bags & Luggage",
                (
                    "Tote Bag",
                    "Duffel Bag",
                    "Carry-On Suitcase",
                    "Wallet",
                    "Crossbody Bag",
                    "Laptop Backpack",
                ),
                (19, 229),
                ("Black", "Brown", "Navy", "Gray", "Red", "Beige"),
            ),
        ),
    ),
    Top(
        "Grocery & Gourmet Food",
        ("Golden Harvest", "Blue Ridge", "Meadowbrook", "Sunny Acres", "Old Mill"),
        (
            "responsibly sourced ingredients",
            "no artificial colors or flavors",
            "a resealable package for freshness",
            "small-batch production",
            "a rich, balanced flavor",
        ),
        (
            Leaf(
                "Coffee",
                (
                    "Whole Bean Coffee",
                    "Ground Coffee",
                    "Coffee Pods",
                    "Cold Brew Concentrate",
                    "Espresso Roast",
                ),
                (8, 39),
            ),
            Leaf(
                "Tea",
                (
                    "Green Tea",
                    "Black Tea",
                    "Herbal Tea",
                    "Chai Tea",
                    "Matcha Powder",
                    "Earl Grey Tea",
                ),
                (5, 29),
            ),
            Leaf(
                "Snacks",
                (
                    "Trail Mix",
                    "Granola Bars",
                    "Kettle Chips",
                    "Dark Chocolate",
                    "Almonds",
                    "Beef Jerky",
                ),
                (3, 25),
            ),
            Leaf(
                "Pantry Staples",
                ("Olive Oil", "Pasta", "Maple Syrup", "Honey", "Hot Sauce", "Spice Set"),
                (4, 35),
            ),
        ),
    ),
    Top(
        "Office Products",
        ("Inkwell", "Paperline", "Deskwise", "Scribe"),
        (
            "smooth, smudge-free writing",
            "acid-free paper",
            "a sturdy build for daily office use",
            "a clean, minimal design",
            "generous capacity",
        ),
        (
            Leaf(
                "Writing Supplies",
                ("Gel Pens", "Fountain Pen", "Highlighters", "Mechanical Pencil", "Markers"),
                (4, 59),
                ("Black", "Blue", "Red", "Green", "Purple"),
            ),
            Leaf(
                "Notebooks & Paper",
                ("Notebook", "Planner", "Sticky Notes", "Legal Pads", "Sketchbook", "Journal"),
                (3, 35),
                ("Black", "Navy", "Green", "Pink", "Yellow"),
            ),
            Leaf(
                "Desk Accessories",
                (
                    "Desk Organizer",
                    "Stapler",
                    "Monitor Riser",
                    "Desk Mat",
                    "File Holder",
                    "Pen Cup",
                ),
                (7, 79),
                ("Black", "White", "Gray", "Brown"),
            ),
        ),
    ),
    Top(
        "Toys & Games",
        ("Playforge", "Tinker Town", "Brightminds", "Jolly Fox"),
        (
            "hours of screen-free fun",
            "non-toxic, child-safe materials",
            "rules that take minutes to learn",
            "fun for the whole family",
            "sturdy pieces that survive rough play",
        ),
        (
            Leaf(
                "Board Games",
                ("Strategy Game", "Family Board Game", "Trivia Game", "Card Game", "Party Game"),
                (12, 69),
            ),
            Leaf(
                "Puzzles",
                ("Jigsaw Puzzle", "3D Puzzle", "Brain Teaser Set", "Puzzle Box", "Floor Puzzle"),
                (9, 49),
            ),
            Leaf(
                "Building Toys",
                (
                    "Building Blocks Set",
                    "Magnetic Tiles",
                    "Marble Run",
                    "Robot Kit",
                    "Construction Set",
                ),
                (15, 129),
            ),
        ),
    ),
    Top(
        "Pet Supplies",
        ("Pawsome", "Happy Tails", "Whisker & Co", "Furbright"),
        (
            "pet-safe materials",
            "an easy-to-clean design",
            "vet-recommended features",
            "durability for active pets",
            "a cozy feel pets love",
        ),
        (
            Leaf(
                "Dog Supplies",
                ("Dog Bed", "Dog Leash", "Chew Toy", "Dog Collar", "Dog Bowl", "Dog Harness"),
                (6, 99),
                ("Black", "Red", "Blue", "Brown", "Gray"),
                ("S", "M", "L"),
            ),
            Leaf(
                "Cat Supplies",
                ("Cat Tree", "Scratching Post", "Cat Toy", "Litter Box", "Cat Bed", "Cat Carrier"),
                (6, 149),
                ("Gray", "Beige", "White", "Pink"),
            ),
        ),
    ),
    Top(
        "Health & Household",
        ("Vitalis", "CleanSweep", "PureLeaf", "Evergreen Labs"),
        (
            "third-party tested quality",
            "a concentrated formula",
            "plant-based ingredients",
            "a value size that lasts for months",
            "a gentle, effective formula",
        ),
        (
            Leaf(
                "Vitamins & Supplements",
                (
                    "Multivitamin",
                    "Vitamin D3",
                    "Fish Oil",
                    "Protein Powder",
                    "Probiotic",
                    "Magnesium",
                ),
                (8, 59),
            ),
            Leaf(
                "Household Cleaning",
                (
                    "All-Purpose Cleaner",
                    "Dish Soap",
                    "Laundry Detergent",
                    "Microfiber Cloths",
                    "Sponges",
                    "Glass Cleaner",
                ),
                (3, 29),
            ),
        ),
    ),
)

USES = (
    "everyday use",
    "home and travel",
    "busy mornings",
    "weekend adventures",
    "gifting",
    "small spaces",
    "families",
    "beginners and pros alike",
)

REVIEW_TITLES = {
    5: (
        "Absolutely love it",
        "Best {noun} I have owned",
        "Exceeded my expectations",
        "Five stars",
        "Worth every penny",
        "Perfect",
        "Highly recommend",
    ),
    4: (
        "Very good",
        "Great {noun} for the price",
        "Solid purchase",
        "Happy with it",
        "Pretty great",
        "Does the job well",
    ),
    3: ("It's okay", "Decent but not great", "Average {noun}", "Mixed feelings", "Good enough"),
    2: ("Disappointed", "Not as described", "Expected more", "Meh", "Would not buy again"),
    1: ("Terrible", "Broke after a week", "Waste of money", "Do not buy", "Very poor quality"),
}

REVIEW_OPENERS = {
    5: (
        "I bought this {noun} a month ago and use it every day.",
        "This {noun} is fantastic.",
        "I was skeptical at first, but this {noun} won me over.",
        "Bought this as a gift and ended up ordering one for myself.",
    ),
    4: (
        "Overall a very good {noun}.",
        "I have been using this {noun} for a few weeks now.",
        "Nice {noun} with only a couple of small issues.",
        "Good value and it arrived quickly.",
    ),
    3: (
        "This {noun} is fine for the price.",
        "It works, but nothing special.",
        "The {noun} does what it says, mostly.",
        "Some things I like about this {noun} and some I don't.",
    ),
    2: (
        "I had high hopes for this {noun}.",
        "The {noun} arrived on time but the quality is lacking.",
        "Not impressed with this {noun}.",
        "It worked for a while, then problems started.",
    ),
    1: (
        "This {noun} stopped working almost immediately.",
        "Very disappointed with this purchase.",
        "The {noun} looked nothing like the pictures.",
        "Returned it after two days.",
    ),
}

REVIEW_DETAILS = {
    "positive": (
        "The quality is excellent and it feels sturdy.",
        "Setup took less than five minutes.",
        "The color is exactly as pictured.",
        "It is much better than the one I had before.",
        "My whole family uses it.",
        "Shipping was fast and the packaging was nice.",
        "Great value for the money.",
    ),
    "neutral": (
        "The size is a bit smaller than I expected.",
        "Instructions could be clearer.",
        "It is a little overpriced for what you get.",
        "Quality is okay but not premium.",
        "Delivery took longer than promised.",
    ),
    "negative": (
        "The material feels cheap.",
        "Customer service was not helpful.",
        "It does not work as advertised.",
        "Parts were missing from the box.",
        "The finish started peeling quickly.",
    ),
}

REVIEW_CLOSERS = {
    5: ("Would definitely buy again.", "Highly recommended!", "Five stars from me."),
    4: ("I would recommend it.", "Minus one star for small details.", "Happy overall."),
    3: ("Okay if it is on sale.", "Might look for something else next time.", ""),
    2: ("I would not recommend it.", "Look elsewhere.", ""),
    1: ("Save your money.", "Avoid.", "I want a refund."),
}
